// The directory store's per-namespace bounds (docs/e2b.md "The directory store's signed PUT"; issue 17): bytes and
// archives one namespace keeps, PUTs in flight in this process (all and per namespace). Usage is read from the
// directory at each PUT (every replica shares it), plus what this process has reserved for PUTs still streaming.
// A namespace over its bytes or archives loses its own oldest archives first (by mtime; a build's read touches it),
// never one younger than EVICT_MIN_AGE_MS: those are in use, and the PUT is refused instead.
import { readdirSync, rmSync, statSync } from "node:fs";
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

export const defaultDirQuota = (uploadMax: number): DirQuotaLimits => ({
  nsBytes: NS_BYTES_FACTOR * uploadMax,
  nsArchives: DEFAULT_NS_ARCHIVES,
  putsInFlight: DEFAULT_PUTS_IN_FLIGHT,
  nsPutsInFlight: DEFAULT_NS_PUTS_IN_FLIGHT,
});

interface Archive {
  path: string;
  size: number;
  mtimeMs: number;
}

/** Every `<dir>/<ns>/<template>/<hash>.tar` of the namespace (temp files excluded). */
function archivesOf(nsDir: string): Archive[] {
  const out: Archive[] = [];
  let templates: string[];
  try {
    templates = readdirSync(nsDir);
  } catch {
    return out;
  }
  for (const t of templates) {
    let files: string[];
    try {
      files = readdirSync(join(nsDir, t));
    } catch {
      continue;
    }
    for (const f of files) {
      if (!f.endsWith(".tar") || f.startsWith(".")) continue;
      try {
        const st = statSync(join(nsDir, t, f));
        if (st.isFile()) out.push({ path: join(nsDir, t, f), size: st.size, mtimeMs: st.mtimeMs });
      } catch {
        // removed meanwhile
      }
    }
  }
  return out;
}

export type Admission = { ok: true; done: () => void } | { ok: false; message: string };

export class DirQuota {
  private inFlight = 0;
  private readonly byNs = new Map<string, { puts: number; bytes: number }>();

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
    const archives = archivesOf(join(this.dir, ns)).sort((a, b) => a.mtimeMs - b.mtimeMs);
    let bytes = archives.reduce((n, a) => n + a.size, 0) + mine.bytes;
    let count = archives.length + mine.puts;
    const fits = () => bytes + reserve <= this.limits.nsBytes && count + 1 <= this.limits.nsArchives;
    for (const a of archives) {
      if (fits() || this.now() - a.mtimeMs < EVICT_MIN_AGE_MS) break;
      rmSync(a.path, { force: true });
      bytes -= a.size;
      count--;
    }
    if (!fits())
      return {
        ok: false,
        message: `namespace ${ns} holds ${bytes} bytes in ${count} uploaded archives (at most ${this.limits.nsBytes} bytes and ${this.limits.nsArchives} archives; this upload may take ${reserve}); archives older than ${EVICT_MIN_AGE_MS / 60_000} min make room, retry later`,
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
}
