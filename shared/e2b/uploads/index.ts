// shared/e2b/uploads — the COPY archive stores of the build API (docs/e2b.md "COPY uploads"): store.ts the
// interface both implement, dir.ts the directory store with its signed PUT, s3.ts the S3 store (presigned PUTs).
import { StartupError } from "../../config/index.ts";
import { E2bError } from "../errors.ts";
import type { Clock } from "../../clock/index.ts";
import { DirUploadStore } from "./dir.ts";
import { s3OptionsFromFlags, type S3StoreOptions } from "./s3-options.ts";
import type { UploadStore } from "./store.ts";

export { DirUploadStore, uploadSignature, UPLOAD_URL_TTL_S, type PutOutcome } from "./dir.ts";
export { FILES_HASH_RE, type UploadStore } from "./store.ts";
// s3.ts (and @aws-sdk with it) is loaded only where a bucket is configured: import it from its own path.

export interface UploadStoreSettings {
  dir?: string;
  uploadMax: number;
  s3?: { bucket: string; prefix?: string; endpoint?: string; region?: string; forcePathStyle: boolean };
}

/**
 * The store the flags name, or undefined (then the files route is absent and a COPY step is refused). Throws a
 * StartupError naming the flag when the store cannot be set up (the process exits before listening).
 */
export function createUploadStore(s: UploadStoreSettings, deps: { envdSecret: string; clock?: Clock; onLoadError?: (err: unknown) => void }): UploadStore | undefined {
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
  // A value the S3 store cannot use is a StartupError naming its flag, before anything of @aws-sdk is loaded.
  if (s.s3 !== undefined) return lazyS3Store(s3OptionsFromFlags(s.s3, s.uploadMax), deps.onLoadError);
  return undefined;
}

/**
 * The S3 store behind a dynamic import started at once (so the first build does not wait for it), so that a process
 * without a bucket never loads @aws-sdk. A failed load fails each call with the load's error.
 */
function lazyS3Store(o: S3StoreOptions, onLoadError: ((err: unknown) => void) | undefined): UploadStore {
  const loading = import("./s3.ts").then((m) => m.createS3UploadStore(o));
  // Said once, when it happens (the operator's log line); each call then answers 503.
  loading.catch((err: unknown) => onLoadError?.(err));
  const store = async () => {
    try {
      return await loading;
    } catch {
      // The reason (a module path, a stack) is the operator's, in the log line above; the tenant gets the fact.
      throw new E2bError(503, "upload store: the S3 client could not be loaded on this server");
    }
  };
  return {
    kind: "s3",
    locate: async (ns, template, hash, origin) => (await store()).locate(ns, template, hash, origin),
    open: async (ns, template, hash) => (await store()).open(ns, template, hash),
  };
}
