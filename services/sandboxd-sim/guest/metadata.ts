// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// User-defined file metadata (envd ≥ 0.6.2): `X-Metadata-<key>: <value>` headers on `POST /files` become the
// file's metadata, returned in EntryInfo by Stat, ListDir and the upload reply. envd keeps it in extended
// attributes (`user.e2b.<key>`); here it is a map by guest path that follows moves and removals, copied with the
// files into a fork child or a checkpoint. Rules (the SDK's envd API description): the prefix is stripped and the
// key lowercased; keys and values printable US-ASCII; a key at most 246 bytes; all of a file's metadata, with the
// 9-byte `user.e2b.` prefix counted per key, at most 4096 bytes; each upload replaces the file's metadata (none
// sent = cleared); a repeated header keeps its first value.

const PREFIX = "x-metadata-";
const XATTR_PREFIX_BYTES = "user.e2b.".length;
const MAX_KEY_BYTES = 246;
const MAX_TOTAL_BYTES = 4096;
const PRINTABLE = /^[\x20-\x7e]*$/;

export class MetadataError extends Error {}

/** The metadata an upload carries, validated; throws MetadataError naming the offending key. */
export function metadataFromHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  let total = 0;
  headers.forEach((value, name) => {
    if (!name.toLowerCase().startsWith(PREFIX)) return;
    const key = name.slice(PREFIX.length).toLowerCase();
    // Headers joins repeated fields with ", ": the first value is the one kept.
    const first = value.split(", ")[0] ?? "";
    if (key === "" || !PRINTABLE.test(key)) throw new MetadataError(`metadata key ${JSON.stringify(key)} must be non-empty printable US-ASCII`);
    if (!PRINTABLE.test(first)) throw new MetadataError(`metadata value of ${JSON.stringify(key)} must be printable US-ASCII`);
    if (key.length > MAX_KEY_BYTES) throw new MetadataError(`metadata key ${JSON.stringify(key.slice(0, 20))}… is longer than ${MAX_KEY_BYTES} bytes`);
    if (!(key in out)) {
      out[key] = first;
      total += XATTR_PREFIX_BYTES + key.length + first.length;
    }
  });
  if (total > MAX_TOTAL_BYTES) throw new MetadataError(`file metadata is ${total} bytes with the xattr prefix, more than ${MAX_TOTAL_BYTES}`);
  return out;
}

/** Metadata by guest path. */
export class FileMetadata {
  private readonly byPath = new Map<string, Record<string, string>>();

  get(guestPath: string): Record<string, string> | undefined {
    return this.byPath.get(guestPath);
  }
  /** An upload's metadata replaces what the file had; an empty set clears it. */
  set(guestPath: string, meta: Record<string, string>): void {
    if (Object.keys(meta).length) this.byPath.set(guestPath, { ...meta });
    else this.byPath.delete(guestPath);
  }
  /** A path and everything under it moved from `from` to `to`. */
  move(from: string, to: string): void {
    for (const [p, m] of [...this.byPath]) {
      if (p !== from && !p.startsWith(`${from}/`)) continue;
      this.byPath.delete(p);
      this.byPath.set(to + p.slice(from.length), m);
    }
  }
  /** A path and everything under it removed. */
  remove(path: string): void {
    for (const p of [...this.byPath.keys()]) if (p === path || p.startsWith(`${path}/`)) this.byPath.delete(p);
  }
  copyFrom(other: FileMetadata): void {
    for (const [p, m] of other.byPath) this.byPath.set(p, { ...m });
  }
}
