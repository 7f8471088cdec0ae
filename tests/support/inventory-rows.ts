// The largest caller metadata sandboxd (and so the e2b surface) accepts on one sandbox: 16 pairs of 3-byte keys and
// 240-byte values, 4,034 bytes as JSON against sandboxd's 4 KiB (shared/sandboxd/metadata.ts). `i` makes each
// sandbox's values its own, so no encoder or store can share them. Used by the full-capacity test and the inventory
// bench (issue 29).
export function largestMetadata(i: number): Record<string, string> {
  return Object.fromEntries(
    Array.from({ length: 16 }, (_, k) => [`k${String(k).padStart(2, "0")}`, `${i}-${k}-`.padEnd(240, String.fromCharCode(97 + ((i + k) % 26)))]),
  );
}
