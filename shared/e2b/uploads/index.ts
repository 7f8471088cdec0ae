// shared/e2b/uploads — the COPY archive stores of the build API (docs/e2b.md "COPY uploads"): store.ts the
// interface both implement, dir.ts the directory store with its signed PUT, s3.ts the S3 store (presigned PUTs).
import { StartupError } from "../../config/index.ts";
import type { Clock } from "../../clock/index.ts";
import { DirUploadStore } from "./dir.ts";
import { createS3UploadStoreFromFlags } from "./s3.ts";
import type { UploadStore } from "./store.ts";

export { DirUploadStore, uploadSignature, UPLOAD_URL_TTL_S, type PutOutcome } from "./dir.ts";
export { FILES_HASH_RE, type UploadStore } from "./store.ts";
export { createS3UploadStore, createS3UploadStoreFromFlags, type S3UploadStore } from "./s3.ts";

export interface UploadStoreSettings {
  dir?: string;
  uploadMax: number;
  s3?: { bucket: string; prefix?: string; endpoint?: string; region?: string; forcePathStyle: boolean };
}

/**
 * The store the flags name, or undefined (then the files route is absent and a COPY step is refused). Throws a
 * StartupError naming the flag when the store cannot be set up (the process exits before listening).
 */
export function createUploadStore(s: UploadStoreSettings, deps: { envdSecret: string; clock?: Clock }): UploadStore | undefined {
  if (s.dir !== undefined && s.s3 !== undefined) {
    throw new StartupError("e2b: --e2b-build-dir and --e2b-build-store-s3-bucket are exclusive", { flag: "--e2b-build-dir" });
  }
  if (s.dir !== undefined) {
    try {
      DirUploadStore.ensureDir(s.dir);
    } catch (err) {
      throw new StartupError(`e2b: --e2b-build-dir ${JSON.stringify(s.dir)} cannot be created: ${(err as Error).message}`, { flag: "--e2b-build-dir" });
    }
    return new DirUploadStore(s.dir, deps.envdSecret, s.uploadMax, deps.clock);
  }
  // A value the S3 store cannot use is a StartupError naming its flag (s3.ts).
  if (s.s3 !== undefined) return createS3UploadStoreFromFlags(s.s3, s.uploadMax);
  return undefined;
}
