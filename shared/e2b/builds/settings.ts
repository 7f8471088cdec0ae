// The build API's settings (docs/e2b.md "Builds"), from the --e2b-build-* flags (shared/config E2bOptions.builds).
import type { E2bOptions } from "../../config/index.ts";
import { StartupError } from "../../config/index.ts";
import type { UploadStoreSettings } from "../uploads/index.ts";

export interface BuildSettings {
  parallel: number;
  timeoutMs: number;
  logLines: number;
  store: UploadStoreSettings;
}

/** Undefined when --e2b-builds is off; the refusals of docs/e2b.md §1.2 as StartupErrors naming the flag. */
export function buildSettingsFrom(b: E2bOptions["builds"]): BuildSettings | undefined {
  if (!b.enabled) return undefined;
  if (b.parallel < 1) throw new StartupError(`e2b: invalid build options: --e2b-build-parallel must be at least 1 (got ${b.parallel})`, { flag: "--e2b-build-parallel" });
  if (!(b.timeoutMs > 0)) throw new StartupError("e2b: invalid build options: --e2b-build-timeout must be positive", { flag: "--e2b-build-timeout" });
  return {
    parallel: b.parallel,
    timeoutMs: b.timeoutMs,
    logLines: b.logLines,
    store: {
      ...(b.dir !== undefined ? { dir: b.dir } : {}),
      uploadMax: b.uploadMax,
      ...(b.s3.bucket !== undefined
        ? {
            s3: {
              bucket: b.s3.bucket,
              ...(b.s3.prefix ? { prefix: b.s3.prefix } : {}),
              ...(b.s3.endpoint !== undefined ? { endpoint: b.s3.endpoint } : {}),
              ...(b.s3.region !== undefined ? { region: b.s3.region } : {}),
              forcePathStyle: b.s3.forcePathStyle,
            },
          }
        : {}),
    },
  };
}
