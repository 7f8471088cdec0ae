// Build records (docs/e2b.md §6.2): process-local, keyed `<ns>/<name>/<buildID>`, each with its log (at most
// --e2b-build-log-lines lines; later lines are dropped, with one line saying so). A record that finished, or was
// never started, is dropped an hour later. A build's output is the tenant's: besides the line count, one log holds
// at most LOG_MAX_BYTES and all logs of the process LOGS_MAX_BYTES (then the oldest finished record goes first).
import { type Clock, formatRfc3339Nano, realClock } from "../../clock/index.ts";

export const RECORD_TTL_MS = 60 * 60_000;
/** Bounds the registry itself: a key holder could otherwise register builds without end. */
export const MAX_RECORDS = 10_000;
/** And per namespace, so one key holder cannot take the whole registry from the others. */
export const MAX_RECORDS_PER_NAMESPACE = 200;
/** Bytes one build's log may hold (64 KiB lines, 10 000 of them, would be 640 MiB). */
export const LOG_MAX_BYTES = 8 * 1024 * 1024;
/** Bytes all logs of this process may hold. */
export const LOGS_MAX_BYTES = 256 * 1024 * 1024;
/** What one entry costs beyond its message (timestamp, step, object). */
const ENTRY_OVERHEAD = 96;
/** A status page holds at most this many entries when the poll names no limit (the SDKs page on until empty). */
export const PAGE_MAX_ENTRIES = 1000;
/** And at most about this many bytes, whatever the limit (one entry always, so a page never stalls). */
export const PAGE_MAX_BYTES = 1024 * 1024;
/** An entry's cost: a JS string holds UTF-16 units, two bytes each. */
const costOf = (message: string) => message.length * 2 + ENTRY_OVERHEAD;

/**
 * The bytes every log of the process holds; `evict` frees some (a finished record's log, `ns`'s own first), false
 * when it cannot.
 */
export class LogBudget {
  used = 0;
  constructor(
    readonly max: number,
    private readonly evict: (ns: string) => boolean = () => false,
  ) {}

  take(n: number, ns = ""): boolean {
    while (this.used + n > this.max) if (!this.evict(ns)) return false;
    this.used += n;
    return true;
  }
}

export type BuildStatus = "waiting" | "building" | "ready" | "error";
export type LogLevel = "debug" | "info" | "warn" | "error";
export const LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

export interface LogEntry {
  timestamp: string;
  message: string;
  level: LogLevel;
  step: string;
}

export class BuildLog {
  readonly entries: LogEntry[] = [];
  private dropped = 0;
  /** Bytes taken from the budget (given back when the record is dropped). */
  bytes = 0;

  constructor(
    private readonly cap: number,
    private readonly clock: Clock = realClock,
    private readonly budget: LogBudget = new LogBudget(LOGS_MAX_BYTES),
    /** The namespace whose budget share this log spends. */
    readonly ns = "",
  ) {}

  /**
   * Append a line. `own` lines (the build's own outcome: a handful per build) are always kept, so the last line
   * says how the build ended; output lines beyond the bounds are dropped, the first drop noted once.
   */
  add(step: string, level: LogLevel, message: string, own = false): void {
    const cost = costOf(message);
    // Once a line was dropped every later output line is (the note says so), and the executor stops decoding.
    const fits = this.dropped === 0 && this.entries.length < this.cap && this.bytes + cost <= LOG_MAX_BYTES;
    if (own || (fits && this.budget.take(cost, this.ns))) {
      if (own) this.budget.used += cost;
      this.bytes += cost;
      this.entries.push({ timestamp: formatRfc3339Nano(this.clock.now()), message, level, step });
      return;
    }
    if (this.dropped++ === 0) this.add(step, "warn", "log limit reached: later output lines are dropped", true);
  }

  /** Give the log's bytes back to the budget (its record is dropped). */
  release(): void {
    this.budget.used -= this.bytes;
    this.bytes = 0;
  }

  /** Output lines are being dropped: the build's output past this point is read only to find the step's end. */
  get full(): boolean {
    return this.dropped > 0;
  }

  get droppedLines(): number {
    return this.dropped;
  }

  /** A page from `offset` of the lines at `level` and above (the offset counts the filtered lines). */
  page(offset: number, limit: number | undefined, level: LogLevel | undefined): LogEntry[] {
    const min = level ? LEVELS.indexOf(level) : 0;
    const visible = min === 0 ? this.entries : this.entries.filter((e) => LEVELS.indexOf(e.level) >= min);
    const max = Math.min(limit ?? PAGE_MAX_ENTRIES, visible.length - offset);
    const out: LogEntry[] = [];
    let bytes = 0;
    for (let i = 0; i < max; i++) {
      const e = visible[offset + i]!;
      bytes += costOf(e.message);
      if (out.length > 0 && bytes > PAGE_MAX_BYTES) break;
      out.push(e);
    }
    return out;
  }

  last(): LogEntry | undefined {
    return this.entries[this.entries.length - 1];
  }
}

export interface BuildRecord {
  ns: string;
  name: string;
  buildID: string;
  tags: string[];
  size: "small" | "medium" | "large" | undefined;
  status: BuildStatus;
  createdAt: number;
  /** When it reached ready or error. */
  finishedAt?: number;
  started: boolean;
  reason?: { message: string; step: string };
  log: BuildLog;
}

export class BuildRecords {
  private readonly records = new Map<string, BuildRecord>();
  readonly budget: LogBudget;

  constructor(
    private readonly logLines: number,
    private readonly clock: Clock = realClock,
    maxLogBytes = LOGS_MAX_BYTES,
  ) {
    this.budget = new LogBudget(maxLogBytes, (ns) => this.evictOldestFinished(ns));
  }

  /**
   * Drop a finished record (its log frees the budget): the oldest of `ns` itself, else the oldest of the namespace
   * whose logs hold the most bytes, so one tenant's output never pushes out a lighter tenant's logs. False when
   * none has finished.
   */
  private evictOldestFinished(ns: string): boolean {
    const held = new Map<string, number>();
    for (const r of this.records.values()) held.set(r.ns, (held.get(r.ns) ?? 0) + r.log.bytes);
    const rank = (r: BuildRecord) => (r.ns === ns ? Infinity : held.get(r.ns)!);
    let oldest: [string, BuildRecord] | undefined;
    for (const e of this.records) {
      const r = e[1];
      if (r.finishedAt === undefined) continue;
      if (!oldest || rank(r) > rank(oldest[1]) || (rank(r) === rank(oldest[1]) && r.finishedAt < oldest[1].finishedAt!)) oldest = e;
    }
    if (!oldest) return false;
    this.drop(oldest[0], oldest[1]);
    return true;
  }

  private drop(key: string, r: BuildRecord): void {
    r.log.release();
    this.records.delete(key);
  }

  private static key(ns: string, name: string, buildID: string): string {
    return `${ns}/${name}/${buildID}`;
  }

  /** Drop records finished (or never started) over an hour ago. */
  prune(): void {
    const cutoff = this.clock.now() - RECORD_TTL_MS;
    for (const [k, r] of this.records) {
      const since = r.finishedAt ?? (r.started ? undefined : r.createdAt);
      if (since !== undefined && since <= cutoff) this.drop(k, r);
    }
  }

  add(r: Omit<BuildRecord, "status" | "createdAt" | "started" | "log">): BuildRecord | undefined {
    this.prune();
    if (this.records.size >= MAX_RECORDS) return undefined;
    let mine = 0;
    for (const rec of this.records.values()) if (rec.ns === r.ns && ++mine >= MAX_RECORDS_PER_NAMESPACE) return undefined;
    const rec: BuildRecord = { ...r, status: "waiting", createdAt: this.clock.now(), started: false, log: new BuildLog(this.logLines, this.clock, this.budget, r.ns) };
    this.records.set(BuildRecords.key(r.ns, r.name, r.buildID), rec);
    return rec;
  }

  get(ns: string, name: string, buildID: string): BuildRecord | undefined {
    this.prune();
    return this.records.get(BuildRecords.key(ns, name, buildID));
  }

  finish(r: BuildRecord, status: "ready" | "error", reason?: { message: string; step: string }): void {
    r.status = status;
    r.finishedAt = this.clock.now();
    if (reason) r.reason = reason;
  }

  /** Records still running (for shutdown). */
  running(): BuildRecord[] {
    return [...this.records.values()].filter((r) => r.status === "building");
  }
}
