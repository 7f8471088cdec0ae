// The directory store's per-namespace bounds (docs/e2b.md "The directory store's signed PUT"; issues 17 and 27):
// bytes and archives one namespace keeps, PUTs in flight in this process (all and per namespace). Usage is kept per
// namespace in memory (an index of its archives: size and mtime), read from the directory once and again at most
// every RESCAN_MS (every replica shares the directory: what another replica wrote is counted from then on), and
// updated by this process's own writes, reads and evictions; a PUT that fits costs no file system call.
// A namespace over its bytes or archives loses its own oldest archives first (by mtime; a build's read touches it),
// each re-read from disk before it goes (another replica may have read it since), never one younger than
// EVICT_MIN_AGE_MS: those are in use, and the PUT is refused instead. A template directory left empty (by an
// eviction, a failed PUT or a rescan) is removed, and so is a namespace directory left empty.
import { readdirSync, rmdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

export interface DirQuotaLimits {
  /** Bytes of archives per namespace (default 16 x --e2b-build-upload-max). */
  nsBytes: number;
  nsArchives: number;
  putsInFlight: number;
  nsPutsInFlight: number;
}

export const DEFAULT_NS_ARCHIVES = 1000;
export const DEFAULT_PUTS_IN_FLIGHT = 16;
export const DEFAULT_NS_PUTS_IN_FLIGHT = 4;
export const NS_BYTES_FACTOR = 16;
/** An archive written or read this recently is never evicted (a build may be about to copy it). */
export const EVICT_MIN_AGE_MS = 10 * 60_000;
/** How old a namespace's index may get before a PUT reads the directory again (other replicas' archives). */
export const RESCAN_MS = 60_000;
/** Archives one PUT re-reads from disk while looking for ones old enough to evict; past them it is refused. */
export const EVICT_EXAMINE_MAX = 64;

export const defaultDirQuota = (uploadMax: number): DirQuotaLimits => ({
  nsBytes: NS_BYTES_FACTOR * uploadMax,
  nsArchives: DEFAULT_NS_ARCHIVES,
  putsInFlight: DEFAULT_PUTS_IN_FLIGHT,
  nsPutsInFlight: DEFAULT_NS_PUTS_IN_FLIGHT,
});

interface Archive {
  size: number;
  mtimeMs: number;
}

/** One namespace's archives as this process knows them: path -> size and mtime, with the byte total. */
interface NamespaceIndex {
  archives: Map<string, Archive>;
  bytes: number;
  readAt: number;
}

/** Remove `dir` if it is empty (ENOTEMPTY: a PUT is writing there, or another replica stored an archive). */
export function removeIfEmpty(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch {
    return false;
  }
}

export type Admission = { ok: true; done: () => void } | { ok: false; message: string };

export class DirQuota {
  private inFlight = 0;
  private readonly byNs = new Map<string, { puts: number; bytes: number }>();
  private readonly index = new Map<string, NamespaceIndex>();

  constructor(
    private readonly dir: string,
    readonly limits: DirQuotaLimits,
    private readonly now: () => number,
  ) {}

  /** Admit a PUT of at most `reserve` bytes for `ns`, evicting the namespace's oldest archives if it must. */
  admit(ns: string, reserve: number): Admission {
    const mine = this.byNs.get(ns) ?? { puts: 0, bytes: 0 };
    if (this.inFlight >= this.limits.putsInFlight) return { ok: false, message: `${this.limits.putsInFlight} uploads already in progress on this server; retry` };
    if (mine.puts >= this.limits.nsPutsInFlight) return { ok: false, message: `namespace ${ns} already has ${mine.puts} uploads in progress (at most ${this.limits.nsPutsInFlight}); retry` };
    const idx = this.indexOf(ns);
    const fits = () => idx.bytes + mine.bytes + reserve <= this.limits.nsBytes && idx.archives.size + mine.puts + 1 <= this.limits.nsArchives;
    if (!fits()) this.evict(ns, idx, fits);
    if (!fits())
      return {
        ok: false,
        message: `namespace ${ns} holds ${idx.bytes + mine.bytes} bytes in ${idx.archives.size + mine.puts} uploaded archives (at most ${this.limits.nsBytes} bytes and ${this.limits.nsArchives} archives; this upload may take ${reserve}); archives older than ${EVICT_MIN_AGE_MS / 60_000} min make room, retry later`,
      };
    this.inFlight++;
    mine.puts++;
    mine.bytes += reserve;
    this.byNs.set(ns, mine);
    let released = false;
    return {
      ok: true,
      done: () => {
        if (released) return;
        released = true;
        this.inFlight--;
        mine.puts--;
        mine.bytes -= reserve;
        if (mine.puts === 0) this.byNs.delete(ns);
      },
    };
  }

  /** An archive this process stored (counted at once, not at the next rescan). */
  stored(ns: string, path: string, size: number): void {
    const idx = this.index.get(ns);
    if (!idx) return; // read in full at the namespace's next PUT
    this.forget(idx, path);
    idx.archives.set(path, { size, mtimeMs: this.now() });
    idx.bytes += size;
  }

  /** An archive a build read (its mtime was set to now): the newest, last to be evicted. */
  touched(ns: string, path: string): void {
    const a = this.index.get(ns)?.archives.get(path);
    if (a) a.mtimeMs = this.now();
  }

  /** Archives and bytes this process counts for `ns` (tests, and the 429's message). */
  usage(ns: string): { archives: number; bytes: number } {
    const idx = this.indexOf(ns);
    return { archives: idx.archives.size, bytes: idx.bytes };
  }

  private forget(idx: NamespaceIndex, path: string): void {
    const a = idx.archives.get(path);
    if (!a) return;
    idx.archives.delete(path);
    idx.bytes -= a.size;
  }

  /** The namespace's index, read from the directory when absent or older than RESCAN_MS. */
  private indexOf(ns: string): NamespaceIndex {
    const known = this.index.get(ns);
    if (known && this.now() - known.readAt < RESCAN_MS) return known;
    const idx = this.scan(ns);
    this.index.set(ns, idx);
    return idx;
  }

  /** Every `<dir>/<ns>/<template>/<hash>.tar` (temp files excluded); empty template and namespace folders removed. */
  private scan(ns: string): NamespaceIndex {
    const idx: NamespaceIndex = { archives: new Map(), bytes: 0, readAt: this.now() };
    const nsDir = join(this.dir, ns);
    let templates: string[];
    try {
      templates = readdirSync(nsDir);
    } catch {
      return idx;
    }
    let left = templates.length;
    for (const t of templates) {
      const folder = join(nsDir, t);
      let files: string[];
      try {
        files = readdirSync(folder);
      } catch {
        continue;
      }
      if (files.length === 0) {
        if (removeIfEmpty(folder)) left--;
        continue;
      }
      for (const f of files) {
        if (!f.endsWith(".tar") || f.startsWith(".")) continue;
        try {
          const st = statSync(join(folder, f));
          if (!st.isFile()) continue;
          idx.archives.set(join(folder, f), { size: st.size, mtimeMs: st.mtimeMs });
          idx.bytes += st.size;
        } catch {
          // removed meanwhile
        }
      }
    }
    if (left === 0) removeIfEmpty(nsDir);
    return idx;
  }

  /**
   * The namespace's own oldest archives go until the PUT fits: each re-read from disk first (another replica may have
   * read it, or evicted it, since), at most EVICT_EXAMINE_MAX of them, never one younger than EVICT_MIN_AGE_MS.
   */
  private evict(ns: string, idx: NamespaceIndex, fits: () => boolean): void {
    const oldest = [...idx.archives.entries()].sort((a, b) => a[1].mtimeMs - b[1].mtimeMs);
    let examined = 0;
    for (const [path] of oldest) {
      if (fits() || examined++ >= EVICT_EXAMINE_MAX) break;
      const disk = this.restat(idx, path);
      if (!disk || this.now() - disk.mtimeMs < EVICT_MIN_AGE_MS) continue;
      rmSync(path, { force: true });
      this.forget(idx, path);
      const folder = join(path, "..");
      if (removeIfEmpty(folder)) removeIfEmpty(join(this.dir, ns));
    }
  }

  /** The archive as the disk has it now (the index updated), or undefined when it is gone. */
  private restat(idx: NamespaceIndex, path: string): Archive | undefined {
    try {
      const st = statSync(path);
      const a = { size: st.size, mtimeMs: st.mtimeMs };
      this.forget(idx, path);
      idx.archives.set(path, a);
      idx.bytes += a.size;
      return a;
    } catch {
      this.forget(idx, path);
      return undefined;
    }
  }
}
