// Owner re-check and the releasing-list drain (§5.10), every 10 s.
//
// A preserved row (settled, `owner` set, no Pod) waits for its owner. Each due row's owner is read through
// the same delete-authorization table as DeletePod: a release verdict detaches the row onto the releasing
// list; otherwise the next read is 10 s later, doubling to a 10-minute cap (+10, +20, +40 s, ...), so a live
// owner costs one GET every 10 minutes at steady state.
//
// The releasing list is persisted BEFORE any entry is acted on (project decision on open question 2): the
// move is written first, and only entries a landed write contained are released. A crash between the move
// and the release therefore keeps the credential, and a release that fails is retried every tick, across
// restarts, until sandboxd confirms the sandbox gone (204 or 404).
import type { Core } from "./core.ts";
import { errorMessage } from "#shared/log/index.ts";
import { authorizeRelease } from "./ownership.ts";

export const RECHECK_FIRST_DELAY_MS = 10_000;
/** A live owner is still read every 10 minutes: owners deleted without a Pod event must not leak for long. */
export const RECHECK_MAX_DELAY_MS = 10 * 60_000;

function namespaceOf(key: string): string {
  const i = key.indexOf("/");
  return i < 0 ? "default" : key.slice(0, i);
}

export async function ownerRecheckTick(core: Core): Promise<void> {
  await recheckOwners(core);
  await drainReleasing(core);
}

async function recheckOwners(core: Core): Promise<void> {
  const { st, log } = core;
  const now = core.now();
  const preserved: Array<readonly [string, string]> = [];
  for (const [key, c] of st.claims) {
    if (c.owner && st.settled(key) && !st.pods.has(key)) preserved.push([key, c.id]);
  }
  const keys = new Set(preserved.map(([k]) => k));
  for (const key of st.ownerRechecks.keys()) if (!keys.has(key)) st.ownerRechecks.delete(key);

  for (const [key, id] of preserved) {
    let entry = st.ownerRechecks.get(key);
    if (!entry) {
      entry = { next: now, delay: RECHECK_FIRST_DELAY_MS };
      st.ownerRechecks.set(key, entry);
    }
    if (entry.next > now) continue;
    const owner = st.claims.get(key)?.owner;
    if (!owner) continue;
    const verdict = await authorizeRelease(owner, namespaceOf(key), core.ownerReader);
    if (verdict.action === "release") {
      if (!st.pods.has(key) && st.settled(key) && st.moveToReleasing(key, id)) {
        log.info({ pod: key, claimId: id, reason: verdict.reason }, "owner re-check: claim queued for release");
      }
      continue;
    }
    const current = st.ownerRechecks.get(key);
    if (current === entry) {
      st.ownerRechecks.set(key, { next: now + entry.delay, delay: Math.min(entry.delay * 2, RECHECK_MAX_DELAY_MS) });
    }
    log.debug({ pod: key, claimId: id, reason: verdict.reason, nextInMs: entry.delay }, "owner re-check: preserved");
  }
}

/** The drain in flight per provider: drains run one after another, so no entry is released twice at once. */
const draining = new WeakMap<Core, Promise<void>>();

/**
 * Persist pending moves, then release every durable entry with its own token. Serialised per provider: the
 * tick, the shutdown drain and the startup pass for Pods deleted while the daemon was down (absent-pods.ts) may
 * overlap.
 */
export function drainReleasing(core: Core): Promise<void> {
  const next = (draining.get(core) ?? Promise.resolve()).then(() => drainOnce(core));
  draining.set(core, next.catch(() => undefined));
  return next;
}

async function drainOnce(core: Core): Promise<void> {
  const { st, log } = core;
  if (st.releasing.some((e) => !e.durable)) {
    try {
      await st.save();
    } catch (e) {
      log.error({ err: errorMessage(e) }, "claims state write failed; queued releases wait until it is durable");
    }
  }
  let released = 0;
  for (const entry of st.releasing.filter((e) => e.durable)) {
    try {
      const outcome = await core.release(entry.claim);
      st.releasing = st.releasing.filter((e) => e !== entry);
      released++;
      log.info({ claimId: entry.claim.id, outcome }, "queued release confirmed");
    } catch (e) {
      log.warn({ claimId: entry.claim.id, err: errorMessage(e) }, "queued release failed; retrying next tick");
    }
  }
  if (released > 0) {
    await st.save().catch((e) => log.error({ err: errorMessage(e) }, "claims state write after releases failed"));
  }
}
