// Flag rows that several binaries share, declared once so their names, defaults and help text cannot
// drift apart: the fleet sandboxd token, the inventory freshness window, and the e2b surface's
// `--e2b-*` set (served by sandbox-apiserver behind --enable-e2b-api and always by sandbox-e2b).
// Help texts are the seed's (../shared/seeds/003_*.txt), which is authoritative for flags and defaults.
import { StartupError } from "./errors.ts";
import type { EnvOnlySetting } from "./help.ts";
import { listenAddressCheck } from "./host-port.ts";
import { boolFlag, durationFlag, floatFlag, intFlag, listFlag, semverFlag, stringFlag, type DurationValue, type FlagSpec } from "./flag-kinds.ts";
import { cidrProblem } from "./cidr.ts";

/** A float row that refuses negative values at parse time (a usage error, like an int row's min). */
function nonNegative(spec: FlagSpec<number>): FlagSpec<number> {
  return { ...spec, schema: spec.schema.refine((v) => v >= 0, { message: "must not be negative" }) };
}

/** The log-level variable of the operator binaries (sandbox-apiserver, sandbox-envd-proxy, sandbox-e2b). */
export const OPERATOR_LOG_LEVEL_ENV = "OPERATOR_LOG_LEVEL";

/** Its row in each of their --help tables. */
export const operatorLogLevelHelp: EnvOnlySetting = {
  env: OPERATOR_LOG_LEVEL_ENV,
  default: "info",
  help: "Log level: debug, info, warn or error; an unknown level fails startup",
};

/** KUBECONFIG's row, for the operator binaries that talk to Kubernetes. */
export const kubeconfigHelp: EnvOnlySetting = { env: "KUBECONFIG", default: "none", help: "Client config when not running in a cluster" };

export const sandboxdTokenFlags = {
  sandboxdToken: stringFlag({
    flag: "sandboxd-token",
    help:
      "sandboxd api_token presented to every node; a binary that reads claim tokens needs the root one. " +
      "Prefer --sandboxd-token-file for a Secret mount.",
  }),
  sandboxdTokenFile: stringFlag({
    flag: "sandboxd-token-file",
    help: "Path to a file (Secret mount) holding the sandboxd api_token; overrides --sandboxd-token when set.",
  }),
} as const;

export const inventoryStaleAfterFlag = {
  // The spec's upstream reading let 0 mean 90s; the project decision makes zero or negative a usage error.
  inventoryStaleAfter: durationFlag({
    flag: "inventory-stale-after",
    default: "90s",
    positive: true,
    help:
      "Drop a node from this process's inventory reads once its NodeInventory publishedAt trails the newest " +
      "publish in the fleet by more than this; set the same value on every binary that reads inventory. " +
      "An inventory without publishedAt is stale.",
  }),
} as const;

/**
 * Why `value` is not a DNS-1123 label (lowercase alphanumerics and `-`, alphanumeric at both ends, at most 63), or
 * undefined when it is. e2b namespaces become the `<ns>/` claim_ref prefix: an empty one or one with a slash would
 * merge tenants.
 */
export function dnsLabelProblem(value: string): string | undefined {
  if (value === "") return "must not be empty";
  if (value.length > 63) return "must be at most 63 characters";
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(value)) return "must be a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)";
  return undefined;
}
export const inventoryTrustedNetworksFlag = {
  // Issue 22 case 2: the root token goes only to an address of the Node an inventory names, and, when set, in these.
  inventoryTrustedNetworks: listFlag({
    flag: "inventory-trusted-networks",
    help:
      "Comma-separated CIDRs (10.0.0.0/8,fd00::/8). A NodeInventory is called only when its Node exists and its " +
      "address host is one of that Node's status.addresses and, when this is set, also lies in one of these networks; others are ignored.",
    check: (cidrs) => {
      for (const c of cidrs) {
        const problem = cidrProblem(c);
        if (problem) return `"${c}": ${problem}`;
      }
      return undefined;
    },
  }),
} as const;

/**
 * Public user ports (docs/decisions.md "Public sandbox ports"): the e2b surface's policy, declared once for both
 * binaries that serve it (sandbox-apiserver, sandbox-e2b) so a create is stamped the same way on either stack.
 */
export const publicTrafficFlags = {
  publicTrafficDefault: boolFlag({
    flag: "public-traffic-default",
    default: "true",
    help: "User ports (all but envd's 49983) of a sandbox created without network.allowPublicTraffic are served with no token, as on e2b cloud. false: such a sandbox gets a trafficAccessToken instead.",
  }),
  forbidPublicTraffic: boolFlag({
    flag: "forbid-public-traffic",
    help: "No sandbox port is ever public: every user port needs the envd access token or the traffic access token (the behaviour before issue 20); a create asking allowPublicTraffic: true is refused.",
  }),
} as const;

/** The same shape as shared/envd-token's PublicTrafficPolicy (config imports nothing of the product). */
export interface PublicTrafficOptions {
  defaultPublic: boolean;
  forbid: boolean;
}

export function publicTrafficFrom(v: { publicTrafficDefault: boolean; forbidPublicTraffic: boolean }): PublicTrafficOptions {
  return { defaultPublic: v.publicTrafficDefault, forbid: v.forbidPublicTraffic };
}

export const E2B_DEFAULT_ENVD_VERSION = "0.8.0";
export const E2B_DEFAULT_TIMEOUT_SECONDS = 300;

export const e2bFlags = {
  e2bBindAddress: stringFlag({
    flag: "e2b-bind-address",
    default: ":8080",
    help: "Address the e2b-compatible surface listens on.",
    check: listenAddressCheck(),
  }),
  e2bNamespace: stringFlag({
    flag: "e2b-namespace",
    default: "default",
    help:
      "Namespace a key that names none claims in, and where anonymous claims land; e2b has no namespace concept. " +
      "A DNS-1123 label, never empty.",
    check: dnsLabelProblem,
  }),
  e2bDomain: stringFlag({
    flag: "e2b-domain",
    help:
      "Base domain the SDK derives the in-sandbox envd host from, as {port}-{sandboxID}.{domain}. Required " +
      "whenever the surface is served: without it a created sandbox has no reachable data plane.",
  }),
  // Validated as a semantic version at startup: the e2b SDK version-compares it and kills a sandbox
  // whose envd version it cannot parse, so a typo here would break every sandbox, not this process.
  e2bEnvdVersion: semverFlag({
    flag: "e2b-envd-version",
    emptyMeans: E2B_DEFAULT_ENVD_VERSION,
    defaultLabel: `${E2B_DEFAULT_ENVD_VERSION} when empty`,
    help:
      "envd version reported to the SDK. It must name the envd actually installed in the pool's image; the " +
      "SDK version-compares it and kills the sandbox when it cannot parse one.",
  }),
  e2bDefaultTimeout: intFlag({
    flag: "e2b-default-timeout",
    default: "0",
    min: 0,
    defaultLabel: `${E2B_DEFAULT_TIMEOUT_SECONDS} when 0`,
    help: "Lease in seconds granted to a create that names no timeout, and the lease an SDK refresh renews for.",
  }),
  e2bApiKeyFile: stringFlag({
    flag: "e2b-api-key-file",
    help:
      "Path to a file (Secret mount) of accepted e2b API keys, one per line as key [namespace] " +
      "[max-sandboxes=N] [creates-per-second=R] [max-snapshots=N] [snapshots-per-second=R], presented by the SDK " +
      "as X-API-KEY; a key sees only the sandboxes and snapshots of its namespace, --e2b-namespace when none is " +
      "given. The quota fields override the --e2b-default-* quota flags of the same name for that namespace.",
  }),
  e2bDefaultMaxSandboxes: intFlag({
    flag: "e2b-default-max-sandboxes",
    default: "0",
    min: 0,
    defaultLabel: "0 (no limit)",
    help:
      "Sandboxes, running or paused, a namespace may hold through the e2b surface when its key-file line sets no " +
      "max-sandboxes; a create, fork or snapshot restore beyond it answers 429 with Retry-After.",
  }),
  // A decimal rate (0.5 = one start every 2 s); a negative one is a usage error (exit 2).
  e2bDefaultCreatesPerSecond: nonNegative(
    floatFlag({
      flag: "e2b-default-creates-per-second",
      default: "0",
      defaultLabel: "0 (no limit)",
      help:
        "Sandbox starts per second (creates, fork children, snapshot restores, resumes) a namespace may make " +
        "through the e2b surface when its key-file line sets no creates-per-second; bursts up to one second's " +
        "worth, then 429 with Retry-After.",
    }),
  ),
  e2bDefaultMaxSnapshots: intFlag({
    flag: "e2b-default-max-snapshots",
    default: "0",
    min: 0,
    defaultLabel: "0 (no limit)",
    help:
      "Snapshots (full-VM checkpoints, kept after their sandbox ends) a namespace may keep through the e2b " +
      "surface when its key-file line sets no max-snapshots; a snapshot beyond it answers 429 with Retry-After " +
      "until one is deleted.",
  }),
  e2bDefaultSnapshotsPerSecond: nonNegative(
    floatFlag({
      flag: "e2b-default-snapshots-per-second",
      default: "0",
      defaultLabel: "0 (no limit)",
      help:
        "Snapshots per second a namespace may take through the e2b surface when its key-file line sets no " +
        "snapshots-per-second; bursts up to one second's worth, then 429 with Retry-After.",
    }),
  ),
  e2bAllowAnonymous: boolFlag({
    flag: "e2b-allow-anonymous",
    help:
      "Serve the e2b surface with NO API key. Development only: it leaves the claim endpoint open to anyone who " +
      "can reach the port.",
  }),
  e2bTemplateAliasFile: stringFlag({
    flag: "e2b-template-alias-file",
    help:
      "Path to a file of e2b template aliases, one per line as alias pool-image [size], so a create naming the " +
      "alias (the SDK's default is base) claims from that image's pool at size, small when none is given.",
  }),
  e2bEnvdSecretFile: stringFlag({
    flag: "e2b-envd-secret-file",
    help:
      "Path to a file (Secret mount) holding the key every sandbox's envd access token derives from; the e2b " +
      "surface and the envd-proxy must read the same one. Required with the e2b surface.",
  }),
  e2bBuilds: boolFlag({
    flag: "e2b-builds",
    help:
      "Serve the e2b template build API (Template.build). Builds run in the process that took the request and " +
      "live in its memory, so every status poll must reach the same replica.",
  }),
  e2bBuildParallel: intFlag({
    flag: "e2b-build-parallel",
    default: "2",
    help: "Builds that run at once; a start beyond them answers 429 and the build stays waiting.",
  }),
  e2bBuildTimeout: durationFlag({
    flag: "e2b-build-timeout",
    default: "30m",
    help: "Bound on one build, claim through publish; it is also the lease of the build's sandbox.",
  }),
  e2bBuildLogLines: intFlag({
    flag: "e2b-build-log-lines",
    default: "10000",
    min: 0,
    help: "Log lines kept per build; later lines are dropped.",
  }),
  e2bBuildDir: stringFlag({
    flag: "e2b-build-dir",
    help:
      "Directory that keeps the archives COPY steps upload, taken through this surface's own signed PUT. Every " +
      "replica must see the same directory, or use --e2b-build-store-s3-bucket.",
  }),
  e2bBuildUploadMax: intFlag({
    flag: "e2b-build-upload-max",
    default: "1073741824",
    min: 1,
    help: "Largest archive in bytes a signed PUT to --e2b-build-dir takes.",
  }),
  e2bBuildStoreS3Bucket: stringFlag({
    flag: "e2b-build-store-s3-bucket",
    help:
      "S3 bucket that keeps the archives COPY steps upload, through presigned PUTs; credentials come from the " +
      "default AWS chain.",
  }),
  e2bBuildStoreS3Prefix: stringFlag({
    flag: "e2b-build-store-s3-prefix",
    help: "Key prefix for the archives in --e2b-build-store-s3-bucket; they live under <prefix>/e2b-files/.",
  }),
  e2bBuildStoreS3Endpoint: stringFlag({
    flag: "e2b-build-store-s3-endpoint",
    help: "Endpoint of an S3-compatible store instead of AWS.",
  }),
  e2bBuildStoreS3Region: stringFlag({
    flag: "e2b-build-store-s3-region",
    help: "Region of --e2b-build-store-s3-bucket.",
  }),
  e2bBuildStoreS3ForcePathStyle: boolFlag({
    flag: "e2b-build-store-s3-force-path-style",
    help: "Address the bucket in the path, as most S3-compatible stores need.",
  }),
} as const;

/** The e2b surface's settings after defaults are resolved ("0 means 300", "empty means 0.8.0"). */
export interface E2bOptions {
  bindAddress: string;
  namespace: string;
  domain: string;
  envdVersion: string;
  defaultTimeoutSeconds: number;
  apiKeyFile: string | undefined;
  allowAnonymous: boolean;
  templateAliasFile: string | undefined;
  envdSecretFile: string | undefined;
  /** Quota of a namespace whose key-file line sets none; 0 = no limit. */
  defaultQuota: { maxSandboxes: number; createsPerSecond: number; maxSnapshots: number; snapshotsPerSecond: number };
  builds: {
    enabled: boolean;
    parallel: number;
    timeoutMs: number;
    logLines: number;
    dir: string | undefined;
    uploadMax: number;
    s3: {
      bucket: string | undefined;
      prefix: string;
      endpoint: string | undefined;
      region: string | undefined;
      forcePathStyle: boolean;
    };
  };
}

const orUndefined = (value: string): string | undefined => (value === "" ? undefined : value);

export function e2bOptionsFrom(v: {
  e2bBindAddress: string;
  e2bNamespace: string;
  e2bDomain: string;
  e2bEnvdVersion: string;
  e2bDefaultTimeout: number;
  e2bApiKeyFile: string;
  e2bAllowAnonymous: boolean;
  e2bTemplateAliasFile: string;
  e2bEnvdSecretFile: string;
  e2bDefaultMaxSandboxes: number;
  e2bDefaultCreatesPerSecond: number;
  e2bDefaultMaxSnapshots: number;
  e2bDefaultSnapshotsPerSecond: number;
  e2bBuilds: boolean;
  e2bBuildParallel: number;
  e2bBuildTimeout: DurationValue;
  e2bBuildLogLines: number;
  e2bBuildDir: string;
  e2bBuildUploadMax: number;
  e2bBuildStoreS3Bucket: string;
  e2bBuildStoreS3Prefix: string;
  e2bBuildStoreS3Endpoint: string;
  e2bBuildStoreS3Region: string;
  e2bBuildStoreS3ForcePathStyle: boolean;
}): E2bOptions {
  return {
    bindAddress: v.e2bBindAddress,
    namespace: v.e2bNamespace,
    domain: v.e2bDomain.trim(),
    envdVersion: v.e2bEnvdVersion,
    defaultTimeoutSeconds: v.e2bDefaultTimeout === 0 ? E2B_DEFAULT_TIMEOUT_SECONDS : v.e2bDefaultTimeout,
    apiKeyFile: orUndefined(v.e2bApiKeyFile),
    allowAnonymous: v.e2bAllowAnonymous,
    templateAliasFile: orUndefined(v.e2bTemplateAliasFile),
    envdSecretFile: orUndefined(v.e2bEnvdSecretFile),
    defaultQuota: {
      maxSandboxes: v.e2bDefaultMaxSandboxes,
      createsPerSecond: v.e2bDefaultCreatesPerSecond,
      maxSnapshots: v.e2bDefaultMaxSnapshots,
      snapshotsPerSecond: v.e2bDefaultSnapshotsPerSecond,
    },
    builds: {
      enabled: v.e2bBuilds,
      parallel: v.e2bBuildParallel,
      timeoutMs: v.e2bBuildTimeout.ms,
      logLines: v.e2bBuildLogLines,
      dir: orUndefined(v.e2bBuildDir),
      uploadMax: v.e2bBuildUploadMax,
      s3: {
        bucket: orUndefined(v.e2bBuildStoreS3Bucket),
        prefix: v.e2bBuildStoreS3Prefix,
        endpoint: orUndefined(v.e2bBuildStoreS3Endpoint),
        region: orUndefined(v.e2bBuildStoreS3Region),
        forcePathStyle: v.e2bBuildStoreS3ForcePathStyle,
      },
    },
  };
}

/**
 * The startup checks of e2b.md §1.2 that need no file: each is fatal (exit 1) before listening, with the
 * message the spec gives. File checks (unreadable or empty secret, malformed key or alias lines) belong
 * to the module that reads those files.
 */
export function checkE2bOptions(o: E2bOptions): void {
  if (o.apiKeyFile === undefined && !o.allowAnonymous) {
    throw new StartupError(
      "e2b: no API key configured: set --e2b-api-key-file, or --e2b-allow-anonymous for development",
      { flag: "--e2b-api-key-file" },
    );
  }
  if (o.domain === "") throw new StartupError("e2b: no domain configured: set --e2b-domain", { flag: "--e2b-domain" });
  if (o.envdSecretFile === undefined) {
    throw new StartupError("--e2b-envd-secret-file is required", { flag: "--e2b-envd-secret-file" });
  }
  if (o.builds.enabled && (o.builds.parallel < 1 || o.builds.timeoutMs <= 0)) {
    throw new StartupError(
      `e2b: invalid build options: --e2b-build-parallel must be at least 1 (got ${o.builds.parallel}) and ` +
        "--e2b-build-timeout positive",
      { flag: "--e2b-build-parallel" },
    );
  }
  if (o.builds.dir !== undefined && o.builds.s3.bucket !== undefined) {
    throw new StartupError("e2b: --e2b-build-dir and --e2b-build-store-s3-bucket are exclusive", {
      flag: "--e2b-build-dir",
    });
  }
}

