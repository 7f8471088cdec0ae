// The S3 store's per-namespace bounds (docs/e2b.md "The S3 store's bounds", issue 27): the directory store's bytes
// and archives per namespace, and upload links outstanding per namespace in place of its PUTs in flight (a presigned
// PUT goes to S3 straight from the client, so what this process can count is the links it handed out and did not see
// used yet). A link reserves one archive and --e2b-build-upload-max bytes until a listing shows its object or it
// expires; a second link request for the same archive shares the first one's reservation.
//
// A presigned PUT cannot bound its length: the SDK asks for the link before it builds the archive, so there is no
// length to sign, and S3 has no size condition for a presigned PUT (only POST policies have one, and the SDK PUTs).
// So a listing deletes every object of the namespace larger than upload-max (the executor refuses to read one
// anyway), and the outstanding-link bound caps how many unchecked PUTs a namespace can have at once.
//
// Usage is the namespace's listing (ListObjectsV2 under `<prefix>/e2b-files/<ns>/`, kept LIST_TTL_MS), plus its
// outstanding links. Over a bound, its own oldest objects (by LastModified, or a read through this process if later)
// are deleted, never one younger than EVICT_MIN_AGE_MS; else 429. Counts are per replica: each replica has its own
// links, so with N replicas a namespace can hold N x the link bound, and what another replica's links upload counts
// from the next listing.
import { E2bError } from "../errors.ts";
import { DEFAULT_NS_ARCHIVES, EVICT_MIN_AGE_MS, NS_BYTES_FACTOR } from "./dir-quota.ts";

/** Links a namespace may have outstanding in one replica (the directory store allows 4 PUTs at once). */
export const DEFAULT_NS_LINKS = 16;
/** How long a namespace's listing is reused before the next link request lists again. */
export const LIST_TTL_MS = 10_000;
/** Reads remembered per namespace (eviction protection for archives a build read lately). */
const READS_MAX = 1024;

export interface S3QuotaLimits {
  nsBytes: number;
  nsArchives: number;
  nsLinks: number;
}

export const defaultS3Quota = (uploadMax: number): S3QuotaLimits => ({ nsBytes: NS_BYTES_FACTOR * uploadMax, nsArchives: DEFAULT_NS_ARCHIVES, nsLinks: DEFAULT_NS_LINKS });

export interface ListedObject {
  key: string;
  size: number;
  lastModifiedMs: number;
}

/** The S3 calls the bounds need, each already bounded in time and in flight by the store. */
export interface S3QuotaCalls {
  /** The namespace's objects (at most `max` of them: past that the namespace is over its count anyway). */
  list(ns: string, max: number): Promise<ListedObject[]>;
  remove(key: string): Promise<void>;
}

interface Namespace {
  /** Object key -> when its link expires. */
  links: Map<string, number>;
  listing?: { objects: ListedObject[]; at: number };
  /** Object key -> when this process last read it (Map order: oldest first). */
  reads: Map<string, number>;
}

export class S3Quota {
  private readonly byNs = new Map<string, Namespace>();

  constructor(
    readonly limits: S3QuotaLimits,
    private readonly uploadMax: number,
    private readonly calls: S3QuotaCalls,
    private readonly now: () => number = Date.now,
  ) {}

  private nsOf(ns: string): Namespace {
    let n = this.byNs.get(ns);
    if (!n) this.byNs.set(ns, (n = { links: new Map(), reads: new Map() }));
    return n;
  }

  /** The archive is in the bucket (a HEAD found it): its link, if any, is used up. */
  present(ns: string, key: string): void {
    this.byNs.get(ns)?.links.delete(key);
  }

  /** A build read the archive: not evicted for EVICT_MIN_AGE_MS. */
  read(ns: string, key: string): void {
    const n = this.nsOf(ns);
    n.reads.delete(key);
    n.reads.set(key, this.now());
    if (n.reads.size > READS_MAX) n.reads.delete(n.reads.keys().next().value!);
  }

  /**
   * Admit one upload link for `key` (absent from the bucket) or throw the 429. `expiresInMs` is the link's life: its
   * reservation lasts as long, unless a listing shows the object first.
   */
  async admitLink(ns: string, key: string, expiresInMs: number): Promise<void> {
    const n = this.nsOf(ns);
    const now = this.now();
    for (const [k, until] of n.links) if (until <= now) n.links.delete(k);
    if (n.links.has(key)) {
      n.links.set(key, now + expiresInMs);
      return;
    }
    // Listed first (at most once per LIST_TTL_MS): a listing that shows a link's object frees that link.
    const objects = await this.listing(ns, n);
    if (n.links.size >= this.limits.nsLinks) {
      throw tooMany(`namespace ${ns} has ${n.links.size} upload links not used yet (at most ${this.limits.nsLinks}); upload with them or retry when they expire`);
    }
    const usage = () => {
      const links = n.links.size + 1;
      return { count: objects.length + links, bytes: objects.reduce((s, o) => s + o.size, 0) + links * this.uploadMax };
    };
    const fits = () => usage().count <= this.limits.nsArchives && usage().bytes <= this.limits.nsBytes;
    if (!fits()) await this.evict(n, objects, fits);
    if (!fits()) {
      const u = usage();
      throw tooMany(
        `namespace ${ns} holds ${u.bytes - this.uploadMax} bytes in ${u.count - 1} uploaded archives and unused links (at most ${this.limits.nsBytes} bytes and ${this.limits.nsArchives} archives; a link reserves ${this.uploadMax}); archives older than ${EVICT_MIN_AGE_MS / 60_000} min make room, retry later`,
      );
    }
    // Re-checked after the eviction's awaits: a concurrent request may have taken the last link.
    if (n.links.size >= this.limits.nsLinks && !n.links.has(key)) {
      throw tooMany(`namespace ${ns} has ${n.links.size} upload links not used yet (at most ${this.limits.nsLinks}); upload with them or retry when they expire`);
    }
    n.links.set(key, now + expiresInMs);
  }

  /**
   * The namespace's objects: the kept listing while fresh, else a new one. A new one drops the links whose object it
   * shows and deletes every object larger than upload-max (no build can read one; it only holds space).
   */
  private async listing(ns: string, n: Namespace): Promise<ListedObject[]> {
    if (n.listing && this.now() - n.listing.at < LIST_TTL_MS) return n.listing.objects;
    const at = this.now();
    const all = await this.calls.list(ns, this.limits.nsArchives + this.limits.nsLinks + 1);
    const objects: ListedObject[] = [];
    for (const o of all) {
      n.links.delete(o.key);
      if (o.size > this.uploadMax) await this.calls.remove(o.key).catch(() => undefined);
      else objects.push(o);
    }
    n.listing = { objects, at };
    return objects;
  }

  private async evict(n: Namespace, objects: ListedObject[], fits: () => boolean): Promise<void> {
    const lastUse = (o: ListedObject) => Math.max(o.lastModifiedMs, n.reads.get(o.key) ?? 0);
    const oldest = [...objects].sort((a, b) => lastUse(a) - lastUse(b));
    for (const o of oldest) {
      if (fits() || this.now() - lastUse(o) < EVICT_MIN_AGE_MS) break;
      try {
        await this.calls.remove(o.key);
      } catch {
        break; // the store's own error reaches nobody here: the 429 below says to retry
      }
      objects.splice(objects.indexOf(o), 1);
      n.reads.delete(o.key);
    }
  }
}

function tooMany(message: string): E2bError {
  return new E2bError(429, `upload store: ${message}`, { "retry-after": "5" });
}
