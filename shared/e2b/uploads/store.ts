// Where COPY archives go (e2b.md §6.3): the build API asks a store whether an archive is present and, if not,
// where the SDK should PUT it; the executor later opens it to write into the build's guest. Two implementations:
// the directory store (dir.ts, this surface's own signed PUT) and the S3 store (s3.ts, presigned PUTs).
export interface UploadStore {
  readonly kind: "dir" | "s3";
  locate(ns: string, template: string, hash: string, origin: { baseUrl: string }): Promise<{ present: true } | { present: false; url: string; headers?: Record<string, string> }>;
  open(ns: string, template: string, hash: string): Promise<{ size: number; body: ReadableStream<Uint8Array> } | undefined>;
}

/** A COPY archive's hash as the SDK computes it: sha256, lowercase hex. */
export const FILES_HASH_RE = /^[0-9a-f]{64}$/;
