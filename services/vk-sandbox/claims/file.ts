// The durable file behind the claims table: load once at startup, then atomic whole-file replacement.
// Write = mkdir 0700 (every time: an operator may have removed the directory) -> `<path>.tmp` mode 0600 ->
// fsync -> rename over `<path>` -> fsync the directory, so a crash leaves either the old or the new table,
// never a torn one, and the rename itself survives power loss. Go skips both fsyncs; the spec asks us not to.
//
// Only the two fsyncs wait for the disk, so only they leave the event loop. The other eight calls are metadata
// syscalls of a few microseconds each, made synchronously: awaited one by one they cost a thread-pool round trip
// each, and on a busy 2-core node those wake-ups were most of a write's time (docs/performance.md, "The single-Pod
// path"). The fsyncs stay awaited so the loop keeps serving while the disk works and concurrent commits gather
// into the next group-commit batch.
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import { dirname } from "node:path";
import { ClaimsStateError } from "./errors.ts";
import { decodeTable, type DecodedTable } from "./codec.ts";

/** The file-system calls a write makes, in the order that makes it crash-safe. Injected only by tests. */
export interface ClaimsFs {
  readFile(path: string, encoding: "utf8"): Promise<string>;
  mkdirSync(path: string, options: { recursive: true; mode: number }): unknown;
  openSync(path: string, flags: "w" | "r", mode?: number): number;
  fchmodSync(fd: number, mode: number): void;
  /** The whole body (a string is written as UTF-8). */
  writeFileSync(fd: number, data: string | Uint8Array): void;
  /** Byte ranges written back to back at `position`; answers how many bytes went (a short write is possible). */
  writevSync(fd: number, parts: readonly Uint8Array[], position: number): number;
  /** Waits for the disk: the one asynchronous call besides reading at startup. */
  fsync(fd: number): Promise<void>;
  closeSync(fd: number): void;
  renameSync(from: string, to: string): void;
  unlinkSync(path: string): void;
}

const nodeFs: ClaimsFs = {
  readFile: (path, encoding) => fsp.readFile(path, encoding),
  mkdirSync: (path, options) => fs.mkdirSync(path, options),
  openSync: (path, flags, mode) => fs.openSync(path, flags, mode),
  fchmodSync: (fd, mode) => fs.fchmodSync(fd, mode),
  writeFileSync: (fd, data) => fs.writeFileSync(fd, data),
  writevSync: (fd, parts, position) => fs.writevSync(fd, parts as NodeJS.ArrayBufferView[], position),
  fsync: (fd) => new Promise<void>((resolve, reject) => fs.fsync(fd, (e) => (e ? reject(e) : resolve()))),
  closeSync: (fd) => fs.closeSync(fd),
  renameSync: (from, to) => fs.renameSync(from, to),
  unlinkSync: (path) => fs.unlinkSync(path),
};

export interface ClaimsFileOptions {
  path: string;
  /** Default true. Off only in benchmarks that measure encoding apart from the disk. */
  fsync?: boolean;
  /** Default node:fs. A test records the calls to prove the crash-safe order. */
  fs?: ClaimsFs;
}

export class ClaimsFile {
  readonly path: string;
  private readonly fsync: boolean;
  private readonly fs: ClaimsFs;
  /** Serialises writers that bypass the group commit; the group commit itself never overlaps writes. */
  private tail: Promise<unknown> = Promise.resolve();
  private written = 0;

  constructor(opts: ClaimsFileOptions) {
    if (!opts.path) throw new ClaimsStateError("unwritable", "(empty)", "a state path is required");
    this.path = opts.path;
    this.fsync = opts.fsync ?? true;
    this.fs = opts.fs ?? nodeFs;
  }

  /** Total bytes this instance wrote (benchmark figure). */
  get bytesWritten(): number {
    return this.written;
  }

  /** Missing file = empty table; any other read error or a malformed file throws ClaimsStateError. */
  async load(now: number): Promise<DecodedTable> {
    let text: string;
    try {
      text = await this.fs.readFile(this.path, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return { claims: new Map(), releasing: [], claimedAtFilled: 0 };
      throw new ClaimsStateError("unreadable", this.path, (e as Error).message, e);
    }
    return decodeTable(text, this.path, now);
  }

  /**
   * Replace the file with `text`, or with the concatenation of `parts` (the store's encoder hands the table as byte
   * ranges, written with writev and never joined). Rejects with ClaimsStateError("unwritable"); the old file stays
   * intact.
   */
  write(text: WriteBody): Promise<void> {
    const run = this.tail.then(() => this.writeNow(text));
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async writeNow(data: WriteBody): Promise<void> {
    const tmp = `${this.path}.tmp`;
    const dir = dirname(this.path);
    const f = this.fs;
    try {
      f.mkdirSync(dir, { recursive: true, mode: 0o700 });
      const fd = f.openSync(tmp, "w", 0o600);
      try {
        // open() applies the mode only when it creates the file; a stale tmp from a crash keeps its own.
        f.fchmodSync(fd, 0o600);
        if (Array.isArray(data)) writeParts(f, fd, data);
        else f.writeFileSync(fd, data as string | Uint8Array);
        if (this.fsync) await f.fsync(fd);
      } finally {
        f.closeSync(fd);
      }
      f.renameSync(tmp, this.path);
      if (this.fsync) await syncDir(f, dir);
      this.written += bodyBytes(data);
    } catch (e) {
      try {
        f.unlinkSync(tmp);
      } catch {
        // already renamed or never created
      }
      throw new ClaimsStateError("unwritable", this.path, (e as Error).message, e);
    }
  }
}

/** What a write puts in the file: text (as UTF-8), bytes, or byte ranges back to back. */
export type WriteBody = string | Uint8Array | readonly Uint8Array[];

/** The bytes a write of `body` puts in the file. */
export function bodyBytes(body: WriteBody): number {
  if (typeof body === "string") return Buffer.byteLength(body);
  if (Array.isArray(body)) return (body as readonly Uint8Array[]).reduce((n, p) => n + p.byteLength, 0);
  return (body as Uint8Array).byteLength;
}

/** IOV_MAX is 1024 on Linux: longer lists go in slices. */
const WRITEV_MAX = 512;

/** Writes `parts` back to back from offset 0, finishing any short write. */
function writeParts(f: ClaimsFs, fd: number, parts: readonly Uint8Array[]): void {
  let position = 0;
  for (let i = 0; i < parts.length; i += WRITEV_MAX) {
    let slice = parts.slice(i, i + WRITEV_MAX);
    const end = position + bodyBytes(slice);
    for (;;) {
      position += f.writevSync(fd, slice, position);
      if (position >= end) break;
      // A short write: what is left of this slice goes again.
      slice = [Buffer.concat(slice).subarray(bodyBytes(slice) - (end - position))];
    }
  }
}

async function syncDir(f: ClaimsFs, dir: string): Promise<void> {
  const fd = f.openSync(dir, "r");
  try {
    await f.fsync(fd);
  } finally {
    f.closeSync(fd);
  }
}
