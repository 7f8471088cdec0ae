// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The idle clock (sandboxd.md §6 "Idle clock"; docs/sleep.md). Per pool, from its PUT /v1/pools entry:
//   idle_hibernate_seconds        a running claim idle that long is hibernated (its memory written out and freed)
//   archive_after_seconds         a hibernated claim idle that long is archived (local VM gone, still a claim)
//   archive_delete_after_seconds  how long an archive is kept (0 = kept); past it the claim is deleted
// "Idle" is measured from the claim's last sandbox-token data-plane activity (ports relay, agent relay, exec; a
// relay or exec still open holds the clock, and its close counts as activity). So `archive_after_seconds` counts
// from the same instant as the idle time, which is why sandboxd requires it to be the larger of the two.
// The policy is read from the pool's current entry on every sweep: a PUT that changes or drops a pool's idle time
// applies to the claims of that key at once (a claim of an unpooled key never sleeps by itself).
// This module decides; node.ts acts (counters, guests) and runs the sweep every IDLE_SWEEP_MS on the node's clock.
import type { PoolEntry } from "#shared/sandboxd/index.ts";
import type { Claim } from "./claims.ts";

/** How often the node looks for idle claims: a claim sleeps at most this long after its idle time is up. */
export const IDLE_SWEEP_MS = 1_000;

export interface IdlePolicy {
  /** 0 = never hibernates by itself. */
  idleMs: number;
  /** 0 = never archived by idleness (an archiving pool still archives a hibernated claim at its deadline). */
  archiveAfterMs: number;
  /** 0 = an archive is kept until released. */
  retentionMs: number;
}

export const NO_IDLE_POLICY: IdlePolicy = { idleMs: 0, archiveAfterMs: 0, retentionMs: 0 };

export function idlePolicy(entry: PoolEntry | undefined): IdlePolicy {
  if (!entry) return NO_IDLE_POLICY;
  return {
    // sandboxd refuses an idle time on an egress pool (PUT /v1/pools 400); a config that got one anyway never sleeps.
    idleMs: entry.net === "egress" ? 0 : (entry.idle_hibernate_seconds ?? 0) * 1000,
    archiveAfterMs: entry.net === "egress" ? 0 : (entry.archive_after_seconds ?? 0) * 1000,
    retentionMs: (entry.archive_delete_after_seconds ?? 0) * 1000,
  };
}

export type IdleStep = "hibernate" | "archive" | null;

/**
 * What the idle clock does to one claim now. Nothing while a data-plane connection or exec holds the clock, while
 * a wake is in flight, or for a failed or already archived claim (an archive's retention is its deadline, which
 * the reaper judges).
 */
export function idleStep(c: Claim, p: IdlePolicy, now: number, waking: boolean): IdleStep {
  if (waking || (c.holds ?? 0) > 0) return null;
  const idle = now - c.lastActivity;
  if (c.state === "running" && p.idleMs > 0 && idle >= p.idleMs) return "hibernate";
  if (c.state === "hibernated" && p.archiveAfterMs > 0 && idle >= p.archiveAfterMs) return "archive";
  return null;
}
