// The finalize step of a build (docs/e2b.md §6.2): envd /init stores the final user, workdir and env (the build's
// own access token stays: a clone answers nothing until its create hands it its own token), startCmd runs in the background, readyCmd repeats every second until it exits
// 0, then promote as `e2b/<ns>/<name>` and publish: every node's templates are read live, holders of the name
// OLDER than this promote are deleted (a newer one, from a build that raced this one, is left alone and this one
// is then the older), and the build's tags are written as labels on the new holder.
import type { Logger } from "../../log/index.ts";
import { FANOUT_CONCURRENCY, fleetTemplateOf, mapLimit } from "../../fleet/index.ts";
import { isSandboxdError, parseWireTime, type PromoteReply, type TemplateInfo } from "../../sandboxd/index.ts";
import { INIT_TIMEOUT_MS, envdCall } from "../envd.ts";
import type { NodeAccess } from "../nodes.ts";
import { BUILT_PREFIX } from "../render.ts";
import { goneAfterDelete } from "../template-writes.ts";
import { runCommand, StepFailed, type StepContext } from "./executor.ts";
import { startProcess } from "./envd-client.ts";

const READY_INTERVAL_MS = 1_000;

export async function finalizeGuest(c: StepContext, startCmd: string | undefined, readyCmd: string | undefined, sleep: (ms: number, signal: AbortSignal) => Promise<void>): Promise<void> {
  const { state } = c;
  const body = { defaultUser: state.user, defaultWorkdir: state.workdir, ...(Object.keys(state.env).length ? { envVars: { ...state.env } } : {}), timestamp: new Date().toISOString() };
  const init = await envdCall(
    { address: c.target.address, claimId: c.target.claimId, rootToken: c.target.token },
    { method: "POST", path: "/init", headers: { "x-access-token": c.target.accessToken }, body, timeoutMs: INIT_TIMEOUT_MS },
  ).catch((err: Error) => {
    throw new StepFailed(`storing the sandbox defaults failed: ${err.message}`);
  });
  if (init.status !== 204 && init.status !== 200) throw new StepFailed(`storing the sandbox defaults failed: envd answered ${init.status}`);
  if (startCmd) {
    const r = await startProcess(
      c.target,
      { cmd: "/bin/bash", args: ["-l", "-c", startCmd], user: state.user, cwd: state.workdir, envs: state.env, timeoutMs: 0x7fffffff },
      { signal: c.signal, detachAfterStart: true },
    );
    c.log("info", `start command running${r.pid !== undefined ? ` (pid ${r.pid})` : ""}`);
  }
  if (readyCmd) {
    for (let attempt = 1; ; attempt++) {
      try {
        await runCommand(c, readyCmd, state.user);
        c.log("info", `ready command succeeded (attempt ${attempt})`);
        break;
      } catch (err) {
        if (!(err instanceof StepFailed) || c.signal.aborted) throw err;
      }
      await sleep(READY_INTERVAL_MS, c.signal);
      if (c.signal.aborted) throw new StepFailed("aborted");
    }
  }
}

const createdOf = (t: TemplateInfo) => parseWireTime(t.created_at) ?? 0;
/** Holder order: promote time (seconds on the wire), then digest, so two builds in one second still agree on one newest. */
const newerThan = (a: TemplateInfo, b: TemplateInfo) => createdOf(a) > createdOf(b) || (createdOf(a) === createdOf(b) && a.content_digest > b.content_digest);

/**
 * Promote the build sandbox and publish it. Returns whether a newer holder of the name (a racing build that
 * promoted later) already exists, in which case this build's holder was the older one and is deleted too.
 */
export async function promoteAndPublish(
  nodes: NodeAccess,
  log: Logger,
  o: { ns: string; name: string; address: string; claimId: string; tags: string[]; signal: AbortSignal },
): Promise<{ digest: string; superseded: boolean }> {
  const ref = `${BUILT_PREFIX}${o.ns}/${o.name}`;
  let promoted: PromoteReply;
  try {
    promoted = await nodes.client(o.address).promote(o.claimId, { template: ref }, { signal: o.signal });
  } catch (err) {
    throw new StepFailed(`promoting the build sandbox failed${isSandboxdError(err) && err.status ? ` (node answered ${err.status})` : ""}`);
  }
  const digest = promoted.content_digest;
  const fleet = nodes.nodes().filter((n) => n.address);
  if (!fleet.some((n) => n.address === o.address)) fleet.push({ name: o.address, address: o.address, pools: [], templates: [], entries: [] });
  const infos = await mapLimit(fleet, FANOUT_CONCURRENCY, (n) => nodes.client(n.address).info({ signal: o.signal }));
  const holders: { address: string; t: TemplateInfo }[] = [];
  fleet.forEach((n, i) => {
    const info = infos[i];
    if (info instanceof Error) {
      log.warn({ err: info, node: n.name }, "build publish: a node did not answer its templates; older holders there stay until the next build");
      return;
    }
    for (const t of (info as { templates: TemplateInfo[] }).templates) if (t.key.template === ref) holders.push({ address: n.address, t });
  });
  const mine = holders.find((h) => h.address === o.address && h.t.content_digest === digest);
  // Not listed where it was promoted: a racing build re-promoted the name there since (it replaced this one).
  const superseded = !mine || holders.some((h) => h !== mine && newerThan(h.t, mine.t));
  const stale = !mine ? [] : holders.filter((h) => h !== mine && !newerThan(h.t, mine.t));
  if (mine && superseded) stale.push(mine);
  // Recorded for this replica's next read as they go (NodeAccess.deleteTemplates): the superseded build's own holder too.
  const deleted = await nodes.deleteTemplates(stale.map((h) => ({ address: h.address, template: fleetTemplateOf(h.t) })), { byDigest: true, signal: o.signal });
  for (const r of deleted) if (!goneAfterDelete(r)) log.warn({ err: r, template: ref }, "build publish: deleting an older holder failed");
  const tagLabels = Object.fromEntries(o.tags.map((t) => [t, digest]));
  if (!superseded && o.tags.length > 0) {
    try {
      await nodes.client(o.address).putTemplateLabels(promoted.key, tagLabels, { digest, signal: o.signal });
    } catch (err) {
      throw new StepFailed(`writing the tags failed${isSandboxdError(err) && err.status ? ` (node answered ${err.status})` : ""}`);
    }
  }
  // `ready` is answered next, and the SDK asks exists / creates / lists tags at once: this replica sees its promote
  // now, not one poll later (template-writes.ts).
  if (mine && !superseded) nodes.templateWrites.published(o.address, { ...fleetTemplateOf(mine.t), labels: { ...(mine.t.labels ?? {}), ...tagLabels } });
  nodes.fleet.changed?.();
  return { digest, superseded };
}
