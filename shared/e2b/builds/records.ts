// Build records (docs/e2b.md §6.2): process-local, keyed `<ns>/<name>/<buildID>`, each with its log (at most
// --e2b-build-log-lines lines; later lines are dropped, with one line saying so). A record that finished, or was
// never started, is dropped an hour later.
import { type Clock, formatRfc3339Nano, realClock } from "../../clock/index.ts";

export const RECORD_TTL_MS = 60 * 60_000;
/** Bounds the registry itself: a key holder could otherwise register builds without end. */
export const MAX_RECORDS = 10_000;

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

  constructor(
    private readonly cap: number,
    private readonly clock: Clock = realClock,
  ) {}

  add(step: string, level: LogLevel, message: string): void {
    if (this.entries.length < this.cap) {
      this.entries.push({ timestamp: formatRfc3339Nano(this.clock.now()), message, level, step });
      return;
    }
    this.dropped++;
  }

  get droppedLines(): number {
    return this.dropped;
  }

  /** A page from `offset` of the lines at `level` and above (the offset counts the filtered lines). */
  page(offset: number, limit: number | undefined, level: LogLevel | undefined): LogEntry[] {
    const min = level ? LEVELS.indexOf(level) : 0;
    const visible = min === 0 ? this.entries : this.entries.filter((e) => LEVELS.indexOf(e.level) >= min);
    return visible.slice(offset, limit === undefined ? undefined : offset + limit);
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

  constructor(
    private readonly logLines: number,
    private readonly clock: Clock = realClock,
  ) {}

  private static key(ns: string, name: string, buildID: string): string {
    return `${ns}/${name}/${buildID}`;
  }

  /** Drop records finished (or never started) over an hour ago. */
  prune(): void {
    const cutoff = this.clock.now() - RECORD_TTL_MS;
    for (const [k, r] of this.records) {
      const since = r.finishedAt ?? (r.started ? undefined : r.createdAt);
      if (since !== undefined && since <= cutoff) this.records.delete(k);
    }
  }

  add(r: Omit<BuildRecord, "status" | "createdAt" | "started" | "log">): BuildRecord | undefined {
    this.prune();
    if (this.records.size >= MAX_RECORDS) return undefined;
    const rec: BuildRecord = { ...r, status: "waiting", createdAt: this.clock.now(), started: false, log: new BuildLog(this.logLines, this.clock) };
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
