// The build API's behaviour (docs/e2b.md §6), independent of HTTP: register a build, start it in a slot, run it
// (claim at step `base`, the steps `1`…`N`, then `finalize`), answer its status pages, hand out upload links. The
// build sandbox is claimed with the build timeout as its lease, so a replica that dies mid-build leaks nothing past
// it; a build that fails, times out or is stopped releases it at once.
import { randomBytes, randomUUID } from "node:crypto";
import { type Clock, realClock } from "../../clock/index.ts";
import type { Logger } from "../../log/index.ts";
import { nodeByAddress } from "../../fleet/index.ts";
import { COLD_CLAIM_TIMEOUT_MS, type ClaimRequest } from "../../sandboxd/index.ts";
import { E2bError, badRequest } from "../errors.ts";
import type { AliasTarget } from "../files.ts";
import type { NodeAccess } from "../nodes.ts";
import type { NamespaceQuotas } from "../quotas.ts";
import { INIT_TIMEOUT_MS, RELAY_PROXY_ENV, envdCall } from "../envd.ts";
import { accessTokenHash } from "../tokens.ts";
import { BUILT_PREFIX, NAME_BUDGET } from "../render.ts";
import { placeClaim } from "../placement.ts";
import { FILES_HASH_RE, type UploadStore } from "../uploads/index.ts";
import { CACHE_MAX_ENTRIES, MAX_BUILT_NAMES, builtNames, cacheEntryCount, cacheRef, cachesStep, capCache, findCached, prefixKeys, pruneCache, saveStep } from "./cache.ts";
import { EnvdCallError } from "./envd-client.ts";
import { runStep, StepFailed, type GuestState, type StepContext } from "./executor.ts";
import { finalizeGuest, promoteAndPublish } from "./finalize.ts";
import { BuildRecords, LEVELS, type BuildRecord, type LogEntry, type LogLevel } from "./records.ts";
import type { BuildSettings } from "./settings.ts";
import { BuildSlots } from "./slots.ts";
import { type BuildPlan, type RequestBuildBody, type StartBuildBody, nameOf, planOf, sizeOf } from "./steps.ts";

export interface BuildDeps {
  nodes: NodeAccess;
  aliases: ReadonlyMap<string, AliasTarget>;
  store: UploadStore | undefined;
  log: Logger;
  clock?: Clock;
  /** The namespace quotas: a build sandbox is one of the namespace's sandboxes (max-sandboxes, creates-per-second). */
  quotas?: Pick<NamespaceQuotas, "admit">;
}

export interface BuildStatusReply {
  templateID: string;
  buildID: string;
  status: BuildRecord["status"];
  logs: string[];
  logEntries: LogEntry[];
  reason?: { message: string; step: string; logEntries: LogEntry[] };
}

const HOME = "/home/user";

export class BuildService {
  readonly records: BuildRecords;
  private readonly slots: BuildSlots;
  private readonly clock: Clock;
  /** Running builds' abort controllers (stop() aborts them: each releases its sandbox). */
  private readonly running = new Map<BuildRecord, { ctl: AbortController; done: Promise<void> }>();

  constructor(
    readonly settings: BuildSettings,
    private readonly deps: BuildDeps,
  ) {
    this.clock = deps.clock ?? realClock;
    this.records = new BuildRecords(settings.logLines, this.clock);
    this.slots = new BuildSlots(settings.parallel);
  }

  get store(): UploadStore | undefined {
    return this.deps.store;
  }

  /** `POST /v3/templates`. */
  requestBuild(ns: string, body: RequestBuildBody) {
    const { name, tags } = nameOf(body, ns);
    const buildID = randomUUID();
    const rec = this.records.add({ ns, name, buildID, tags, size: sizeOf(body) });
    if (!rec) throw new E2bError(429, "too many builds registered on this replica; retry later");
    return { templateID: name, buildID, public: true, names: [name, ...tags.map((t) => `${name}:${t}`)], tags, aliases: [name] };
  }

  private record(ns: string, templateID: string, buildID: string): BuildRecord {
    const rec = this.records.get(ns, templateID, buildID);
    if (!rec) throw new E2bError(404, "build not found on this replica");
    return rec;
  }

  /** `POST /v2/templates/{t}/builds/{b}`: validate, take a slot, run in the background. */
  startBuild(ns: string, templateID: string, buildID: string, body: StartBuildBody): void {
    const plan = planOf(body, this.deps.store !== undefined);
    const rec = this.record(ns, templateID, buildID);
    if (rec.started) return;
    const names = builtNames(this.deps.nodes, ns);
    if (!names.has(rec.name) && names.size >= MAX_BUILT_NAMES)
      throw new E2bError(429, `namespace ${ns} already holds ${names.size} built templates (at most ${MAX_BUILT_NAMES}); delete one (DELETE /templates/{id}) or rebuild an existing name`);
    // Admitted as a create is (429 when the namespace holds its max-sandboxes); held until the claim is remembered.
    const settle = this.deps.quotas?.admit(ns, "create") ?? (() => undefined);
    const release = this.slots.tryAcquire(ns);
    if (typeof release !== "function") {
      settle();
      if (release.kind === "busy") throw new E2bError(429, "every build slot is busy; retry the start");
      throw new E2bError(429, `namespace ${ns} already runs ${release.share} build${release.share === 1 ? "" : "s"}, its limit (half of --e2b-build-parallel=${this.settings.parallel}, rounded up); retry the start`);
    }
    rec.started = true;
    rec.status = "building";
    const ctl = new AbortController();
    // The terminal status is set only once the slot is free (and the build sandbox released): a client that sees
    // "ready" and starts its next build must not be told every slot is busy.
    const done = this.run(rec, plan, ctl, settle)
      .catch((err: unknown): Outcome => {
        this.deps.log.error({ err, build: rec.buildID }, "build ended unexpectedly");
        return { status: "error", reason: { message: "internal error", step: "finalize" } };
      })
      .then((outcome) => {
        settle();
        release();
        this.running.delete(rec);
        this.records.finish(rec, outcome.status, outcome.reason);
      });
    this.running.set(rec, { ctl, done });
  }

  /** `GET /templates/{t}/builds/{b}/status`. */
  status(ns: string, templateID: string, buildID: string, q: { logsOffset?: string; limit?: string; level?: string }): BuildStatusReply {
    const offset = nonNegative(q.logsOffset, "logsOffset") ?? 0;
    const limit = nonNegative(q.limit, "limit");
    let level: LogLevel | undefined;
    if (q.level !== undefined && q.level !== "") {
      if (!(LEVELS as readonly string[]).includes(q.level)) throw badRequest(`level must be one of ${LEVELS.join(", ")}`);
      level = q.level as LogLevel;
    }
    const rec = this.record(ns, templateID, buildID);
    const reply: BuildStatusReply = { templateID: rec.name, buildID: rec.buildID, status: rec.status, logs: [], logEntries: rec.log.page(offset, limit, level) };
    if (rec.status === "error" && rec.reason) {
      const last = rec.log.last();
      reply.reason = { ...rec.reason, logEntries: last ? [last] : [] };
    }
    return reply;
  }

  /** `GET /templates/{t}/files/{hash}`. */
  async files(ns: string, templateID: string, hash: string, baseUrl: string) {
    const store = this.deps.store;
    if (!store) throw new E2bError(404, "no upload store is configured on this server");
    checkTemplateName(templateID, ns);
    if (!FILES_HASH_RE.test(hash)) throw badRequest("hash must be 64 lowercase hex characters");
    return store.locate(ns, templateID, hash, { baseUrl });
  }

  /** Abort every running build (each releases its sandbox) and wait for them. */
  async stop(): Promise<void> {
    const all = [...this.running.values()];
    for (const r of all) r.ctl.abort(new Error("the server is stopping"));
    await Promise.all(all.map((r) => r.done));
  }

  // ------------------------------------------------------------------------------------------------------------

  /** Runs the build and releases its sandbox; the caller records the outcome once the slot is free. */
  private async run(rec: BuildRecord, plan: BuildPlan, ctl: AbortController, settle: () => void): Promise<Outcome> {
    const log = this.deps.log.child({ build: rec.buildID, template: rec.name, namespace: rec.ns });
    const deadline = this.clock.monotonic() + this.settings.timeoutMs;
    const timer = this.clock.after(this.settings.timeoutMs, () => ctl.abort(new Error("timeout")));
    let step = "base";
    const say = (level: "info" | "warn" | "error", message: string) => rec.log.add(step, level, message);
    // The build's own outcome lines: always kept, whatever the tenant's output took.
    const tell = (level: "info" | "warn" | "error", message: string) => rec.log.add(step, level, message, true);
    let claim: { address: string; id: string } | undefined;
    let outcome: Outcome;
    try {
      const pool = this.poolOf(plan.fromImage, rec.size);
      say("info", `claiming a sandbox from ${plan.fromImage} (${pool.size})`);
      const req: ClaimRequest = {
        template: pool.image,
        net: "none",
        size: pool.size,
        ttl_seconds: Math.max(1, Math.ceil(this.settings.timeoutMs / 1000)),
        claim_ref: `${rec.ns}/e2b-build-${randomBytes(5).toString("hex")}`,
      };
      const keys = prefixKeys(pool.image, pool.size, plan.steps);
      const cached = await this.claimCached(rec.ns, keys.slice(0, plan.cacheUpTo), req, ctl.signal, log);
      let placed = cached?.placed;
      if (!placed) {
        try {
          placed = await placeClaim(this.deps.nodes, log, { template: pool.image, net: "none", size: pool.size }, req);
        } catch (err) {
          throw new StepFailed(err instanceof E2bError ? err.message : "failed to claim a build sandbox");
        }
      }
      if (!placed) throw new StepFailed(`no warm sandbox available for image "${plan.fromImage}"`);
      const address = nodeByAddress(this.deps.nodes.nodes(), placed.reply.owner_addr)?.address ?? placed.calledAddress;
      claim = { address, id: placed.reply.id };
      // The fleet view lists the claim a poll later: until then the quota counts it from memory, as for a create.
      this.deps.nodes.remember(rec.ns, placed.reply.id, address, this.deps.nodes.nodeNameFor(address));
      settle();
      if (ctl.signal.aborted) throw new StepFailed("aborted");
      const state: GuestState = cached?.state ?? { user: "user", workdir: HOME, env: placed.reply.net_route === "relay" ? { ...RELAY_PROXY_ENV } : {} };
      if (cached) say("info", `steps 1-${cached.steps} cached: starting from the sandbox a previous build left after them`);
      const accessToken = randomBytes(32).toString("hex");
      await this.secureGuest({ address, claimId: placed.reply.id, token: placed.reply.token }, accessToken, cached !== undefined);
      if (ctl.signal.aborted) throw new StepFailed("aborted");
      const ctx: StepContext = {
        target: { address, claimId: placed.reply.id, token: placed.reply.token, accessToken },
        state,
        store: this.deps.store,
        ns: rec.ns,
        name: rec.name,
        signal: ctl.signal,
        remainingMs: () => Math.max(1, deadline - this.clock.monotonic()),
        log: say,
        wantsOutput: () => !rec.log.full,
      };
      for (let i = 0; i < plan.steps.length; i++) {
        step = String(i + 1);
        if (cached && i < cached.steps) {
          say("info", "cached");
          continue;
        }
        await runStep(ctx, plan.steps[i]!);
        // Bounded: the first CACHE_CHAIN_STEPS steps and the last, and nothing once the namespace holds its cap.
        if (!cachesStep(i, plan.steps.length) || cacheEntryCount(this.deps.nodes, rec.ns) >= CACHE_MAX_ENTRIES) continue;
        // A failed save costs the next build a rerun, never this one its result.
        await saveStep(this.deps.nodes, { address, claimId: claim.id, ns: rec.ns, name: rec.name, key: keys[i]!, state, signal: ctl.signal }).catch((err: unknown) => {
          if (!ctl.signal.aborted) log.debug({ err, step }, "build cache: saving the step failed");
        });
      }
      step = "finalize";
      await finalizeGuest(ctx, plan.startCmd, plan.readyCmd, (ms, signal) => this.clock.sleep(ms, signal));
      const pub = await promoteAndPublish(this.deps.nodes, log, { ns: rec.ns, name: rec.name, address, claimId: claim.id, tags: rec.tags, signal: ctl.signal });
      if (pub.superseded) tell("warn", "a build of the same name finished later; it is the template now");
      tell("info", `template ${rec.name} ready`);
      outcome = { status: "ready" };
      await pruneCache(this.deps.nodes, log, rec.ns, rec.name, new Set(keys.flatMap((k) => cacheRef(rec.ns, k) ?? [])));
      await capCache(this.deps.nodes, log, rec.ns, rec.name);
    } catch (err) {
      const why = ctl.signal.aborted
        ? ctl.signal.reason instanceof Error && ctl.signal.reason.message === "timeout"
          ? `build timed out after ${Math.round(this.settings.timeoutMs / 1000)} s`
          : "build stopped: the server is stopping"
        : err instanceof StepFailed || err instanceof EnvdCallError
          ? err.message
          : "internal error";
      if (!(err instanceof StepFailed)) log.warn({ err, step }, "build failed");
      tell("error", why);
      outcome = { status: "error", reason: { message: why, step } };
    } finally {
      timer.cancel();
      if (claim) await this.release(rec.ns, claim, log);
    }
    return outcome;
  }

  /**
   * The build sandbox's envd gets an access token of the build's own before any step, so every template the build
   * promotes (cache entries, the result) holds one and no clone of it answers a caller without a token: the e2b
   * create of a built template, and a later build from a cache entry, hand the clone its own token through instance
   * metadata (`accessTokenHash`), as a fork does. A cache entry's clone holds the earlier build's token: same route.
   */
  private async secureGuest(t: { address: string; claimId: string; token: string }, accessToken: string, clone: boolean): Promise<void> {
    try {
      if (clone) await this.deps.nodes.client(t.address).putInstanceMetadata(t.claimId, { accessTokenHash: accessTokenHash(accessToken) });
      const init = await envdCall(
        // The claim token opens the tunnel, as for every call of the build (the relay is active).
        { address: t.address, claimId: t.claimId, rootToken: t.token },
        { method: "POST", path: "/init", body: { accessToken, timestamp: new Date(this.clock.now()).toISOString() }, timeoutMs: INIT_TIMEOUT_MS },
      );
      if (init.status !== 204 && init.status !== 200) throw new Error(`envd /init answered ${init.status}`);
    } catch (err) {
      throw new StepFailed(`securing the build sandbox failed: ${(err as Error).message}`);
    }
  }

  /** A claim of the longest cached step prefix (require_promoted on the node holding it); undefined: none usable. */
  private async claimCached(ns: string, keys: string[], req: ClaimRequest, signal: AbortSignal, log: Logger) {
    const hit = findCached(this.deps.nodes, ns, keys);
    if (!hit) return undefined;
    try {
      const reply = await this.deps.nodes
        .client(hit.address)
        .claim({ ...req, template: hit.template.template, size: hit.template.size, require_promoted: true }, { timeoutMs: COLD_CLAIM_TIMEOUT_MS, signal });
      return { placed: { reply, calledAddress: hit.address }, steps: hit.steps, state: hit.state };
    } catch (err) {
      log.debug({ err }, "build cache: the cached sandbox could not be claimed; building from the image");
      return undefined;
    }
  }

  private async release(ns: string, claim: { address: string; id: string }, log: Logger): Promise<void> {
    try {
      await this.deps.nodes.client(claim.address).release(claim.id);
      // Out of the namespace's quota count at once, although the fleet view lists it a while longer.
      this.deps.nodes.forget(ns, claim.id);
      this.deps.nodes.markReleased(claim.id);
    } catch (err) {
      log.warn({ err, sandbox: claim.id }, "releasing the build sandbox failed; its lease (the build timeout) ends it");
    }
    this.deps.nodes.fleet.changed?.(claim.address);
  }

  private poolOf(fromImage: string, size: BuildRecord["size"]): { image: string; size: "small" | "medium" | "large" } {
    const a = this.deps.aliases.get(fromImage);
    const image = a?.image ?? fromImage;
    return { image, size: size ?? (a?.size as "small" | "medium" | "large" | undefined) ?? "small" };
  }
}

type Outcome = { status: "ready" | "error"; reason?: { message: string; step: string } };

function nonNegative(v: string | undefined, name: string): number | undefined {
  if (v === undefined || v === "") return undefined;
  if (!/^\d{1,9}$/.test(v)) throw badRequest(`${name} must be a non-negative integer`);
  return Number(v);
}

/** A template name in a files route: within the `e2b/<ns>/<name>` budget, no `/` `\`, not starting with `.`. */
export function checkTemplateName(name: string, ns: string): void {
  if (name === "" || `${BUILT_PREFIX}${ns}/${name}`.length > NAME_BUDGET || /[/\\]/.test(name) || name.startsWith(".")) throw badRequest(`invalid template name "${name.slice(0, 80)}"`);
}
