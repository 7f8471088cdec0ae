// The durable file behind the claims table: load once at startup, then atomic whole-file replacement.
// Write = mkdir 0700 (every time: an operator may have removed the directory) -> `<path>.tmp` mode 0600 ->
// fsync -> rename over `<path>` -> fsync the directory, so a crash leaves either the old or the new table,
// never a torn one, and the rename itself survives power loss. Go skips both fsyncs; the spec asks us not to.
import * as fsp from "node:fs/promises";
import { dirname } from "node:path";
import { ClaimsStateError } from "./errors.ts";
import { decodeTable, type DecodedTable } from "./codec.ts";

/** The file-system calls a write makes, in the order that makes it crash-safe. Injected only by tests. */
export type ClaimsFs = Pick<typeof fsp, "mkdir" | "open" | "readFile" | "rename" | "unlink">;

export interface ClaimsFileOptions {
  path: string;
  /** Default true. Off only in benchmarks that measure encoding apart from the disk. */
  fsync?: boolean;
  /** Default node:fs/promises. A test records the calls to prove the crash-safe order. */
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
    this.fs = opts.fs ?? fsp;
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

  /** Replace the file with `text`. Rejects with ClaimsStateError("unwritable"); the old file stays intact. */
  write(text: string): Promise<void> {
    const run = this.tail.then(() => this.writeNow(text));
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async writeNow(text: string): Promise<void> {
    const tmp = `${this.path}.tmp`;
    const dir = dirname(this.path);
    try {
      await this.fs.mkdir(dir, { recursive: true, mode: 0o700 });
      const fh = await this.fs.open(tmp, "w", 0o600);
      try {
        // open() applies the mode only when it creates the file; a stale tmp from a crash keeps its own.
        await fh.chmod(0o600);
        await fh.writeFile(text, "utf8");
        if (this.fsync) await fh.sync();
      } finally {
        await fh.close();
      }
      await this.fs.rename(tmp, this.path);
      if (this.fsync) await syncDir(this.fs, dir);
      this.written += Buffer.byteLength(text);
    } catch (e) {
      await this.fs.unlink(tmp).catch(() => undefined);
      throw new ClaimsStateError("unwritable", this.path, (e as Error).message, e);
    }
  }
}

async function syncDir(fs: ClaimsFs, dir: string): Promise<void> {
  const dh = await fs.open(dir, "r");
  try {
    await dh.sync();
  } finally {
    await dh.close();
  }
}
