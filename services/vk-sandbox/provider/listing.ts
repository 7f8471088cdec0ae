// Reading sandboxd's live index into a lookup by id. A listing that fails throws: callers defer every
// absence-based decision (a failed list is not an empty list).
import type { SandboxRow } from "#shared/sandboxd/index.ts";
import { floorToSecond, parseGoTime } from "#shared/clock/index.ts";

export type Listing = Map<string, SandboxRow>;

export function byId(rows: readonly SandboxRow[]): Listing {
  return new Map(rows.map((r) => [r.id, r]));
}

/** A listed row's deadline as the table keeps it (whole seconds; 0 = none, e.g. archived forever). */
export function listedDeadline(row: SandboxRow): number {
  return wireDeadline(row.deadline);
}

/** A wire deadline (claim reply or listing) in table form: whole seconds, 0 for absent or Go's zero time. */
export function wireDeadline(text: string | undefined): number {
  if (!text) return 0;
  const t = parseGoTime(text); // null: Go's zero time; undefined: not a time. Either is "no deadline".
  return t ? floorToSecond(t) : 0;
}
