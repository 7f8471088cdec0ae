// The S3 upload store's options and their flags (`--e2b-build-store-s3-*`), apart from the store itself (s3.ts):
// checking the flags at startup must not load @aws-sdk (~200 ms and ~37 MB RSS), which only a process that has a
// bucket configured pays (uploads/index.ts loads s3.ts then).
import { z } from "zod";
import { StartupError } from "../../config/index.ts";

/** Presigned PUTs live as long as the directory store's signed URLs (§6.3): one hour. */
export const PRESIGN_SECONDS = 3600;
/** Bound on one S3 call (HEAD, GetObject's head, a presign's credential lookup), SDK retries included. */
export const DEFAULT_CALL_TIMEOUT_MS = 15_000;
/** A GetObject body that delivers nothing for this long is failed, so a stalled store cannot pin a build. */
export const DEFAULT_BODY_IDLE_MS = 60_000;
/**
 * S3 calls in flight at once (HEADs and presigns for upload links, GETs for builds); one more answers 503 at once.
 * Each key holder can ask for links as fast as it likes; a slow store must not turn that into unbounded waiters.
 */
export const DEFAULT_MAX_IN_FLIGHT = 64;
/** Builds' GetObjects in flight at once: their own allowance, so a flood of link requests never fails a COPY. */
export const DEFAULT_MAX_GETS_IN_FLIGHT = 16;

export const S3StoreOptionsSchema = z.object({
  bucket: z.string().min(1, "bucket is required"),
  /** Key prefix; leading and trailing slashes are ignored. */
  prefix: z.string().optional(),
  /** An S3-compatible endpoint (`http(s)://host[:port]`) instead of AWS. */
  endpoint: z.url({ protocol: /^https?$/ }).optional(),
  /** Region to sign for; else AWS_REGION / AWS_DEFAULT_REGION, else us-east-1. */
  region: z.string().min(1).optional(),
  /** `https://endpoint/bucket/key` instead of `https://bucket.endpoint/key`. */
  forcePathStyle: z.boolean(),
  callTimeoutMs: z.number().int().positive().optional(),
  bodyIdleMs: z.number().int().positive().optional(),
  maxInFlight: z.number().int().positive().optional(),
  maxGetsInFlight: z.number().int().positive().optional(),
  /** --e2b-build-upload-max: a presigned PUT cannot bound its size, so open() refuses a larger archive. */
  uploadMax: z.number().int().positive().optional(),
  /** Per-namespace bounds (s3-quota.ts); each defaults from upload-max like the directory store's. */
  nsBytes: z.number().int().positive().optional(),
  nsArchives: z.number().int().positive().optional(),
  nsLinks: z.number().int().positive().optional(),
});
export type S3StoreOptions = z.input<typeof S3StoreOptionsSchema>;

/** The flags' values as e2bOptionsFrom gives them (`builds.s3` with a bucket). */
export interface S3Flags {
  bucket: string;
  prefix?: string;
  endpoint?: string;
  region?: string;
  forcePathStyle: boolean;
}

/** Which flag carries each option, for startup errors. */
const FLAG_OF: Record<string, string> = {
  bucket: "--e2b-build-store-s3-bucket",
  prefix: "--e2b-build-store-s3-prefix",
  endpoint: "--e2b-build-store-s3-endpoint",
  region: "--e2b-build-store-s3-region",
  forcePathStyle: "--e2b-build-store-s3-force-path-style",
};

/**
 * The store from the `--e2b-build-store-s3-*` flags (e2bOptionsFrom's `builds.s3` with a bucket): a value the store
 * cannot use (an endpoint that is no http(s) URL) is a StartupError naming its flag, so the process exits 1 before
 * listening instead of failing on the first upload.
 */
export function s3OptionsFromFlags(s3: S3Flags, uploadMax?: number): z.output<typeof S3StoreOptionsSchema> {
  const parsed = S3StoreOptionsSchema.safeParse({ ...s3, ...(uploadMax !== undefined ? { uploadMax } : {}) });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const flag = FLAG_OF[String(issue.path[0])] ?? "--e2b-build-store-s3-bucket";
    throw new StartupError(`e2b: ${flag}: ${issue.message}`, { flag });
  }
  return parsed.data;
}

