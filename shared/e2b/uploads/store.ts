// Where COPY archives live (docs/e2b.md "Builds"): the SDK asks `locate` whether an archive is there and, if not,
// where to PUT it; the build executor `open`s it to stream into the build sandbox. Two kinds: a directory this
// surface serves a signed PUT for (dir.ts), and S3 with presigned PUTs (s3.ts).
export interface UploadStore {
  readonly kind: "dir" | "s3";
  locate(ns: string, template: string, hash: string, origin: { baseUrl: string }): Promise<{ present: true } | { present: false; url: string; headers?: Record<string, string> }>;
  open(ns: string, template: string, hash: string): Promise<{ size: number; body: ReadableStream<Uint8Array> } | undefined>;
}

/** A COPY archive's hash as the SDK computes it: sha256, lowercase hex. */
export const FILES_HASH_RE = /^[0-9a-f]{64}$/;
