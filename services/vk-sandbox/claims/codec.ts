// Table <-> file text. Compact JSON, members in the seed's order, empty members omitted (§5.12):
// `address`, `authority`, `claimedAt`, `deadline`, `owner` when empty, `releasing` when it has no entries;
// `podUID` always. Every claim rewrites the whole file, so encoding is on the claim path: each immutable row's
// JSON is cached, and a write of 10,000 rows mostly concatenates cached strings.
import { ClaimsFileSchema, type Claim, type ClaimFileRow, type OwnerRef, type TableSnapshot } from "./schema.ts";
import { ClaimsStateError } from "./errors.ts";
import { floorToSecond, formatRfc3339Seconds } from "#shared/clock/index.ts";

const rowCache = new WeakMap<Claim, string>();
const entryCache = new WeakMap<Claim, { key: string; text: string }>();

/** The row as an object whose member order is the file's: JSON.stringify keeps insertion order. */
function fileObject(c: Claim): Record<string, unknown> {
  const o: Record<string, unknown> = { id: c.id, token: c.token };
  if (c.address) o.address = c.address;
  o.podUID = c.podUID;
  if (c.authority) o.authority = c.authority;
  if (c.claimedAt) o.claimedAt = formatRfc3339Seconds(c.claimedAt);
  if (c.deadline) o.deadline = formatRfc3339Seconds(c.deadline);
  if (c.owner) o.owner = refObject(c.owner);
  // Not in the seed's format: an addition the upstream Go daemon ignores when it reads the table.
  if (c.controller) o.controller = refObject(c.controller);
  return o;
}

function refObject(w: OwnerRef): Record<string, unknown> {
  const ref: Record<string, unknown> = { apiVersion: w.apiVersion, kind: w.kind, name: w.name, uid: w.uid };
  if (w.controller !== undefined) ref.controller = w.controller;
  if (w.blockOwnerDeletion !== undefined) ref.blockOwnerDeletion = w.blockOwnerDeletion;
  return ref;
}

/** One row as compact JSON (no key). */
export function encodeRow(c: Claim): string {
  let hit = rowCache.get(c);
  if (hit === undefined) {
    // One JSON.stringify per row yields a flat string; building it with += made a rope that every later
    // join had to flatten again (measured: 5x slower warm encodes at 10,000 rows).
    hit = JSON.stringify(fileObject(c));
    rowCache.set(c, hit);
  }
  return hit;
}

/** `"<key>":<row>`, cached per row object (a row object lives under one key). */
function encodeEntry(key: string, c: Claim): string {
  const hit = entryCache.get(c);
  if (hit !== undefined && hit.key === key) return hit.text;
  const text = `${JSON.stringify(key)}:${encodeRow(c)}`;
  entryCache.set(c, { key, text });
  return text;
}

export function encodeTable(t: TableSnapshot): string {
  const parts: string[] = [];
  for (const [key, row] of t.claims) parts.push(encodeEntry(key, row));
  return `{"claims":{${parts.join(",")}${tableTail(t.releasing)}`;
}

/** What follows the last claim entry: the claims object's close, the releasing list when it has rows, the end. */
function tableTail(releasing: Iterable<Claim>): string {
  const rel: string[] = [];
  for (const row of releasing) rel.push(encodeRow(row));
  return rel.length > 0 ? `},"releasing":[${rel.join(",")}]}` : "}}";
}

/** A run of consecutive rows and its rendered bytes: each entry preceded by ",". */
interface Run {
  keys: string[];
  rows: Claim[];
  bytes: Uint8Array;
  /** True when the run ended at a cut row; false when it ended at the table's end (it may grow later). */
  cut: boolean;
}

const HEAD = Buffer.from('{"claims":{');

/** A cut after this row ends a run: about one row in 128, decided by the claim id so a run keeps its rows. */
function cutAfter(c: Claim): boolean {
  let h = 0x811c9dc5;
  for (let i = 0; i < c.id.length; i++) h = Math.imul(h ^ c.id.charCodeAt(i), 0x01000193);
  return (h & 127) === 0;
}

/**
 * encodeTable's bytes without re-rendering the whole table for every write. Every claim rewrites the whole file
 * (about one write per Pod under load), and joining 10,000 rows into a fresh string for each write, then encoding
 * it to UTF-8, was a third of the daemon's CPU at 200 Pods/s (docs/performance.md, Throughput). The rows are cut
 * into runs at rows chosen by their claim id, so a run's bounds depend on its own rows only: a new row touches the
 * last run, a deleted row its own run, and every other run is reused as bytes when its rows are the same objects
 * (rows are immutable; a change replaces the object). The output is a list of byte ranges for one writev, never
 * joined (a fresh 2 MB buffer per write cost more than the rendering); concatenated they are encodeTable's text.
 */
export class TableEncoder {
  /** Runs by their first row. */
  private runs = new WeakMap<Claim, Run>();

  encode(t: TableSnapshot): Uint8Array[] {
    const entries = Array.isArray(t.claims) ? (t.claims as ReadonlyArray<readonly [string, Claim]>) : [...t.claims];
    const parts: Uint8Array[] = [HEAD];
    for (let i = 0; i < entries.length; ) {
      const run = this.reuse(entries, i) ?? this.render(entries, i);
      // The first run's leading comma is left out through a view, not a copy.
      parts.push(i === 0 ? run.bytes.subarray(1) : run.bytes);
      i += run.rows.length;
    }
    parts.push(Buffer.from(tableTail(t.releasing)));
    return parts;
  }

  /** The cached run starting at entries[i], if its rows are still exactly these and it still ends where it did. */
  private reuse(entries: ReadonlyArray<readonly [string, Claim]>, i: number): Run | undefined {
    const run = this.runs.get(entries[i]![1]);
    if (!run) return undefined;
    const n = run.rows.length;
    if (i + n > entries.length || (!run.cut && i + n !== entries.length)) return undefined;
    for (let j = 0; j < n; j++) {
      const e = entries[i + j]!;
      if (e[1] !== run.rows[j] || e[0] !== run.keys[j]) return undefined;
    }
    return run;
  }

  private render(entries: ReadonlyArray<readonly [string, Claim]>, i: number): Run {
    const keys: string[] = [];
    const rows: Claim[] = [];
    let text = "";
    let cut = false;
    for (let j = i; j < entries.length; j++) {
      const [key, row] = entries[j]!;
      keys.push(key);
      rows.push(row);
      text += `,${encodeEntry(key, row)}`;
      if (cutAfter(row)) {
        cut = true;
        break;
      }
    }
    const run = { keys, rows, bytes: Buffer.from(text), cut };
    this.runs.set(rows[0]!, run);
    return run;
  }
}

export interface DecodedTable {
  claims: Map<string, Claim>;
  releasing: Claim[];
  /** Rows whose missing claimedAt was filled with `now`; the startup write persists them. */
  claimedAtFilled: number;
}

function toOwner(o: NonNullable<ClaimFileRow["owner"]>): OwnerRef | undefined {
  if (!o.apiVersion && !o.kind && !o.name && !o.uid) return undefined;
  const r: OwnerRef = { apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid };
  if (o.controller !== undefined && o.controller !== null) r.controller = o.controller;
  if (o.blockOwnerDeletion !== undefined && o.blockOwnerDeletion !== null) r.blockOwnerDeletion = o.blockOwnerDeletion;
  return r;
}

/**
 * Parse the file. Undecodable JSON or a wrongly typed member throws ClaimsStateError("malformed"): a table
 * that cannot be read is never replaced by an empty one, because that would discard live release authority.
 */
export function decodeTable(text: string, path: string, now: number): DecodedTable {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ClaimsStateError("malformed", path, `not valid JSON (${(e as Error).message})`, e);
  }
  const parsed = ClaimsFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join(".") || "(root)";
    throw new ClaimsStateError("malformed", path, `${where}: ${issue?.message ?? "invalid"}`, parsed.error);
  }
  const filledAt = floorToSecond(now);
  let claimedAtFilled = 0;
  const toClaim = (r: ClaimFileRow): Claim => {
    if (r.claimedAt === undefined) claimedAtFilled++;
    const owner = r.owner ? toOwner(r.owner) : undefined;
    const controller = r.controller ? toOwner(r.controller) : undefined;
    return {
      id: r.id,
      token: r.token,
      address: r.address,
      podUID: r.podUID,
      authority: r.authority,
      claimedAt: r.claimedAt ?? filledAt,
      deadline: r.deadline ?? 0,
      ...(owner ? { owner } : {}),
      ...(controller ? { controller } : {}),
    };
  };
  const claims = new Map<string, Claim>();
  for (const [key, r] of Object.entries(parsed.data.claims ?? {})) claims.set(key, toClaim(r));
  const releasing = (parsed.data.releasing ?? []).map(toClaim);
  return { claims, releasing, claimedAtFilled };
}
