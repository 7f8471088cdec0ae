// Idempotent create (docs/e2b.md "Idempotent create", issue 20 part 4): a create carrying `Idempotency-Key` (1-255 of
// [a-z0-9-], as the Python SDK 2.63 sends it) returns the sandbox an earlier create of the namespace made with that
// key within IDEMPOTENCY_WINDOW_MS, on any replica: the key and a fingerprint of the body are stamped on the claim's
// metadata, which the fleet view carries (mesh listings, NodeInventory entries). On one replica, concurrent retries
// share one in-flight create; across replicas the stamp is seen once the snapshot lists the claim (one publish).
// The same key with a different body is 409 (docs/decisions.md "Idempotent create").
import { createHash, randomBytes } from "node:crypto";
import type { Clock } from "../clock/index.ts";
import { isSandboxdError } from "../sandboxd/index.ts";
import { E2bError, badRequest } from "./errors.ts";
import { claimedAtOf } from "./lookup.ts";
import { rowBelongs, entriesIn, type NodeAccess } from "./nodes.ts";
import type { OwnWrites } from "./own-writes.ts";
import type { Renderer } from "./render.ts";
import type { NewSandbox, SandboxReply } from "./schemas.ts";
import { SURFACE_METADATA_PREFIX } from "./surface-metadata.ts";
import type { TokenForms } from "./token-forms.ts";

/** How long a key names the sandbox its first create made. */
export const IDEMPOTENCY_WINDOW_MS = 10 * 60_000;
export const IDEMPOTENCY_KEY_RE = /^[a-z0-9-]{1,255}$/;
/**
 * The stamp `<key>.<body fingerprint>.<claim name>` (a key holds no `.`). The claim name ties it to the claim the
 * create made: fork children inherit their parent's metadata (stamp included) under names of their own.
 */
export const IDEMPOTENCY_METADATA_KEY = `${SURFACE_METADATA_PREFIX}idempotency`;
/** Bound on the keys one replica remembers having used (the fleet view is the long-term memory). */
const MADE_MAX = 10_000;

/** The header's key, or undefined when absent; 400 when malformed. */
export function idempotencyKeyOf(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (!IDEMPOTENCY_KEY_RE.test(raw)) throw badRequest("Idempotency-Key: 1 to 255 characters of lowercase letters, digits and '-'");
  return raw;
}

/** A stable digest of a create body: same fields and values, whatever their order, give the same fingerprint. */
export function bodyFingerprint(body: NewSandbox): string {
  return createHash("sha256").update(canonical(body)).digest("hex").slice(0, 32);
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
    return `{${entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

function parseStamp(v: string | undefined): { key: string; fp: string; name: string } | undefined {
  const parts = v?.split(".");
  return parts && parts.length === 3 ? { key: parts[0]!, fp: parts[1]!, name: parts[2]! } : undefined;
}

/** A claim's generated name (the `<name>` of `claim_ref <ns>/<name>`). */
export const newClaimName = () => `e2b-${randomBytes(5).toString("hex")}`;

/** What a stamped create claims with: its metadata pair and the claim name the stamp names. */
export interface Stamp {
  metadata: Record<string, string>;
  claimName: string;
}

/** Where an earlier create with the key is. */
interface Prior {
  claimId: string;
  address: string;
  nodeName: string;
  fp: string;
  at: number;
}

/** What a fresh create reports back, so a retry here finds it before the snapshot lists it. */
export interface Made {
  reply: SandboxReply;
  claimId: string;
  address: string;
  nodeName: string;
}

export interface IdempotencyDeps {
  nodes: Pick<NodeAccess, "nodes" | "client">;
  ownWrites: Pick<OwnWrites, "isKilled">;
  tokenForms: Pick<TokenForms, "accessTokenFor">;
  render: Pick<Renderer, "sandboxReply">;
  clock: Clock;
}

export class IdempotentCreates {
  private readonly inFlight = new Map<string, { fp: string; promise: Promise<SandboxReply> }>();
  private readonly made = new Map<string, Prior>();

  constructor(private readonly d: IdempotencyDeps) {}

  /**
   * The sandbox `key` names in `ns`: an earlier create's (replayed), a concurrent one's (shared), else the one
   * `create(stamp)` makes with the stamp in its claim metadata.
   */
  async run(ns: string, key: string, body: NewSandbox, create: (stamp: Stamp) => Promise<Made>): Promise<SandboxReply> {
    const fp = bodyFingerprint(body);
    const k = `${ns}\0${key}`;
    const running = this.inFlight.get(k);
    if (running) {
      if (running.fp !== fp) throw conflict(key);
      return running.promise;
    }
    // Registered before the first await: a concurrent retry finds it and shares this create.
    const promise = (async () => {
      const replay = await this.replay(ns, key, fp);
      if (replay) return replay;
      const claimName = newClaimName();
      const m = await create({ metadata: { [IDEMPOTENCY_METADATA_KEY]: `${key}.${fp}.${claimName}` }, claimName });
      this.remember(k, { claimId: m.claimId, address: m.address, nodeName: m.nodeName, fp, at: this.d.clock.now() });
      return m.reply;
    })();
    this.inFlight.set(k, { fp, promise });
    try {
      return await promise;
    } finally {
      this.inFlight.delete(k);
    }
  }

  /** The earlier sandbox of the key, read live from its node; undefined when there is none (or it is gone). */
  private async replay(ns: string, key: string, fp: string): Promise<SandboxReply | undefined> {
    const prior = this.find(ns, key);
    if (!prior) return undefined;
    if (prior.fp !== fp) throw conflict(key);
    if (this.d.ownWrites.isKilled(ns, prior.claimId)) return undefined;
    let row;
    try {
      row = await this.d.nodes.client(prior.address).get(prior.claimId);
    } catch (err) {
      if (isSandboxdError(err) && err.status === 404) return undefined;
      throw new E2bError(500, "failed to read the sandbox an earlier create with this Idempotency-Key made").withCode("idempotency_outcome_unknown");
    }
    if (!rowBelongs(row, ns) || !row.token) return undefined;
    const accessToken = await this.d.tokenForms.accessTokenFor(prior.address, prior.claimId, row.token, claimedAtOf(row));
    return this.d.render.sandboxReply({ claimId: prior.claimId, nodeName: prior.nodeName, template: row.key.template, claimToken: row.token, accessToken, metadata: row.metadata });
  }

  /** The newest create of the key within the window: this replica's own, else one the snapshot lists. */
  private find(ns: string, key: string): Prior | undefined {
    const since = this.d.clock.now() - IDEMPOTENCY_WINDOW_MS;
    let best: Prior | undefined;
    const mine = this.made.get(`${ns}\0${key}`);
    if (mine && mine.at >= since) best = mine;
    for (const { node, entry } of entriesIn(this.d.nodes.nodes(), ns)) {
      const stamp = parseStamp(entry.metadata?.[IDEMPOTENCY_METADATA_KEY]);
      if (!stamp || stamp.key !== key || entry.name !== `${ns}/${stamp.name}` || !node.address) continue;
      // A claim with no claim time counts as made now (the window then runs from when it was first seen).
      const at = entry.claimedAt ?? this.d.clock.now();
      if (at < since || (best && best.at >= at)) continue;
      best = { claimId: entry.id, address: node.address, nodeName: node.name, fp: stamp.fp, at };
    }
    return best;
  }

  private remember(k: string, p: Prior): void {
    this.made.delete(k);
    this.made.set(k, p);
    if (this.made.size > MADE_MAX) {
      const since = this.d.clock.now() - IDEMPOTENCY_WINDOW_MS;
      for (const [key, v] of this.made) if (v.at < since) this.made.delete(key);
      while (this.made.size > MADE_MAX) this.made.delete(this.made.keys().next().value!);
    }
  }
}

const conflict = (key: string) =>
  new E2bError(409, `Idempotency-Key "${key}" was used with a different request body within the last ${IDEMPOTENCY_WINDOW_MS / 60_000} minutes`).withCode("idempotency_request_mismatch");
