// sandbox-apiserver's flags: its own (seed 003: sandboxd token, warm-pool driver, inventory freshness,
// the e2b surface) plus the generic aggregated-apiserver option sets it must accept under their
// upstream names and defaults (spec §2.2). There is deliberately no etcd option: this server stores nothing.
import {
  OPERATOR_LOG_LEVEL_ENV,
  StartupError,
  boolFlag,
  checkE2bOptions,
  durationFlag,
  e2bFlags,
  e2bOptionsFrom,
  formatHelp,
  intFlag,
  inventoryStaleAfterFlag,
  inventoryTrustedNetworksFlag,
  kubeconfigHelp,
  listFlag,
  mapOutcome,
  operatorLogLevelHelp,
  parseFlags,
  sandboxdTokenFlags,
  stringFlag,
  type CliOutcome,
  type E2bOptions,
  type Env,
} from "#shared/config/index.ts";
import { ACCEPTED_CIPHER_SUITES, cipherSuitesProblem } from "./serving/index.ts";

export { OPERATOR_LOG_LEVEL_ENV };
export const DEFAULT_WARM_POOL_SYNC_MS = 5_000;
const TLS_VERSIONS = ["VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"];

const ownFlags = {
  ...sandboxdTokenFlags,
  enableWarmPoolDriver: boolFlag({
    flag: "enable-warm-pool-driver",
    default: "true",
    help:
      "Run the in-process SandboxWarmPool → sandboxd pool reconcile loop (control-plane warm-capacity surface; " +
      "pool-level, never per-sandbox).",
  }),
  warmPoolSyncInterval: durationFlag({
    flag: "warm-pool-sync-interval",
    default: "0",
    defaultLabel: "0 (means 5s)",
    help:
      "Resync cadence for the SandboxWarmPool driver, and with it the sampling period of the warm count in " +
      "pool status.",
  }),
  canaryInterval: durationFlag({
    flag: "canary-interval",
    default: "0",
    defaultLabel: "0 (off)",
    help:
      "Every this often, per fresh node and pooled key: claim a warm sandbox, envd /init, run one command, release " +
      "(sandbox_canary_* metrics). 0 or negative turns the canary off.",
  }),
  ...inventoryStaleAfterFlag,
  ...inventoryTrustedNetworksFlag,
  enableE2bApi: boolFlag({
    flag: "enable-e2b-api",
    help:
      "Serve the e2b-compatible REST surface, so an unmodified e2b SDK can claim from the same warm pools " +
      "(point E2B_API_URL at it).",
  }),
  ...e2bFlags,
} as const;

// k8s.io/apiserver's SecureServing, DelegatingAuthentication, DelegatingAuthorization and Features options.
const genericFlags = {
  securePort: intFlag({
    flag: "secure-port",
    default: "6443",
    min: 0,
    max: 65535,
    help: "The port on which to serve HTTPS with authentication and authorization.",
  }),
  bindAddress: stringFlag({
    flag: "bind-address",
    default: "0.0.0.0",
    help: "The IP address on which to listen for the --secure-port port.",
  }),
  tlsCertFile: stringFlag({
    flag: "tls-cert-file",
    help:
      "File containing the default x509 certificate for HTTPS. If neither this nor --tls-private-key-file is " +
      "set, a self-signed pair is generated in --cert-dir.",
  }),
  tlsPrivateKeyFile: stringFlag({
    flag: "tls-private-key-file",
    help: "File containing the default x509 private key matching --tls-cert-file.",
  }),
  certDir: stringFlag({
    flag: "cert-dir",
    default: "apiserver.local.config/certificates",
    help: "The directory where the self-signed TLS pair is kept. Ignored if --tls-cert-file is set.",
  }),
  tlsMinVersion: stringFlag({
    flag: "tls-min-version",
    help: `Minimum TLS version supported. Possible values: ${TLS_VERSIONS.join(", ")}.`,
    check: (v) => (v === "" || TLS_VERSIONS.includes(v) ? undefined : `must be one of ${TLS_VERSIONS.join(", ")}`),
  }),
  tlsCipherSuites: listFlag({
    flag: "tls-cipher-suites",
    help:
      "Comma-separated list of cipher suites for the server (IANA names, as Go takes them). If omitted, the " +
      "runtime defaults are used. TLS 1.3 suites are always enabled and cannot be chosen; Go's insecure suites " +
      `are refused. Possible values: ${ACCEPTED_CIPHER_SUITES.join(", ")}.`,
    check: cipherSuitesProblem,
  }),
  authenticationKubeconfig: stringFlag({
    flag: "authentication-kubeconfig",
    help:
      "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create " +
      "tokenreviews.authentication.k8s.io. Optional in a cluster.",
  }),
  authenticationSkipLookup: boolFlag({
    flag: "authentication-skip-lookup",
    help: "If false, the authentication-kubeconfig is used to look up missing authentication configuration from the cluster.",
  }),
  authenticationTolerateLookupFailure: boolFlag({
    flag: "authentication-tolerate-lookup-failure",
    help:
      "If true, failures to look up missing authentication configuration from the cluster are not considered " +
      "fatal. Note that this can result in authentication that treats all requests as anonymous.",
  }),
  authenticationTokenWebhookCacheTtl: durationFlag({
    flag: "authentication-token-webhook-cache-ttl",
    default: "10s",
    nonNegative: true,
    help: "The duration to cache responses from the webhook token authenticator.",
  }),
  clientCaFile: stringFlag({
    flag: "client-ca-file",
    help:
      "If set, any request presenting a client certificate signed by one of the authorities in the client-ca-file " +
      "is authenticated with an identity corresponding to the CommonName of the client certificate.",
  }),
  requestheaderClientCaFile: stringFlag({
    flag: "requestheader-client-ca-file",
    help:
      "Root certificate bundle to use to verify client certificates on incoming requests before trusting " +
      "usernames in headers specified by --requestheader-username-headers.",
  }),
  requestheaderAllowedNames: listFlag({
    flag: "requestheader-allowed-names",
    help: "List of client certificate common names to allow to provide usernames in headers. If empty, any is allowed.",
  }),
  requestheaderUsernameHeaders: listFlag({
    flag: "requestheader-username-headers",
    default: "x-remote-user",
    help: "List of request headers to inspect for usernames. X-Remote-User is common.",
  }),
  requestheaderGroupHeaders: listFlag({
    flag: "requestheader-group-headers",
    default: "x-remote-group",
    help: "List of request headers to inspect for groups. X-Remote-Group is suggested.",
  }),
  requestheaderExtraHeadersPrefix: listFlag({
    flag: "requestheader-extra-headers-prefix",
    default: "x-remote-extra-",
    help: "List of request header prefixes to inspect. X-Remote-Extra- is suggested.",
  }),
  authorizationKubeconfig: stringFlag({
    flag: "authorization-kubeconfig",
    help:
      "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create " +
      "subjectaccessreviews.authorization.k8s.io. Optional in a cluster.",
  }),
  authorizationAlwaysAllowPaths: listFlag({
    flag: "authorization-always-allow-paths",
    default: "/healthz,/readyz,/livez",
    help: "A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the 'core' kubernetes server.",
  }),
  authorizationWebhookCacheAuthorizedTtl: durationFlag({
    flag: "authorization-webhook-cache-authorized-ttl",
    default: "10s",
    nonNegative: true,
    help: "The duration to cache 'authorized' responses from the webhook authorizer.",
  }),
  authorizationWebhookCacheUnauthorizedTtl: durationFlag({
    flag: "authorization-webhook-cache-unauthorized-ttl",
    default: "10s",
    nonNegative: true,
    help: "The duration to cache 'unauthorized' responses from the webhook authorizer.",
  }),
  profiling: boolFlag({
    flag: "profiling",
    default: "true",
    help: "Enable profiling via web interface host:port/debug/pprof/",
  }),
  contentionProfiling: boolFlag({
    flag: "contention-profiling",
    help: "Enable block profiling, if profiling is enabled. Accepted for compatibility; no effect (Bun has no block profiler).",
  }),
  enablePriorityAndFairness: boolFlag({
    flag: "enable-priority-and-fairness",
    help:
      "Enable API Priority and Fairness. Accepted for compatibility; no effect (requests are not queued by " +
      "priority level), hence the default false where upstream's is true.",
  }),
} as const;

export const apiserverFlags = { ...ownFlags, ...genericFlags } as const;

export interface ApiserverConfig {
  sandboxdToken: string;
  sandboxdTokenFile: string | undefined;
  enableWarmPoolDriver: boolean;
  /** Milliseconds; an unset, zero or negative flag resolves to 5 s. */
  warmPoolSyncInterval: number;
  /** Milliseconds; 0 = the canary is off. */
  canaryInterval: number;
  /** Milliseconds, always positive. */
  inventoryStaleAfter: number;
  /** CIDRs, already checked (--inventory-trusted-networks). */
  inventoryTrustedNetworks: string[];
  enableE2bApi: boolean;
  e2b: E2bOptions;
  serving: {
    securePort: number;
    bindAddress: string;
    tlsCertFile: string | undefined;
    tlsPrivateKeyFile: string | undefined;
    certDir: string;
    tlsMinVersion: string | undefined;
    tlsCipherSuites: string[];
  };
  authentication: {
    kubeconfig: string | undefined;
    skipLookup: boolean;
    tolerateLookupFailure: boolean;
    tokenWebhookCacheTtl: number;
    clientCaFile: string | undefined;
    requestheaderClientCaFile: string | undefined;
    requestheaderAllowedNames: string[];
    requestheaderUsernameHeaders: string[];
    requestheaderGroupHeaders: string[];
    requestheaderExtraHeadersPrefix: string[];
  };
  authorization: {
    kubeconfig: string | undefined;
    alwaysAllowPaths: string[];
    webhookCacheAuthorizedTtl: number;
    webhookCacheUnauthorizedTtl: number;
  };
  profiling: boolean;
  contentionProfiling: boolean;
  enablePriorityAndFairness: boolean;
}

const orUndefined = (value: string): string | undefined => (value === "" ? undefined : value);

export function parseApiserverFlags(argv: readonly string[], env: Env): CliOutcome<ApiserverConfig> {
  return mapOutcome(parseFlags(apiserverFlags, argv, env), ({ values: v }) => ({
    sandboxdToken: v.sandboxdToken,
    sandboxdTokenFile: orUndefined(v.sandboxdTokenFile),
    enableWarmPoolDriver: v.enableWarmPoolDriver,
    warmPoolSyncInterval: v.warmPoolSyncInterval.nanos > 0n ? v.warmPoolSyncInterval.ms : DEFAULT_WARM_POOL_SYNC_MS,
    canaryInterval: v.canaryInterval.nanos > 0n ? v.canaryInterval.ms : 0,
    inventoryStaleAfter: v.inventoryStaleAfter.ms,
    inventoryTrustedNetworks: v.inventoryTrustedNetworks,
    enableE2bApi: v.enableE2bApi,
    e2b: e2bOptionsFrom(v),
    serving: {
      securePort: v.securePort,
      bindAddress: v.bindAddress,
      tlsCertFile: orUndefined(v.tlsCertFile),
      tlsPrivateKeyFile: orUndefined(v.tlsPrivateKeyFile),
      certDir: v.certDir,
      tlsMinVersion: orUndefined(v.tlsMinVersion),
      tlsCipherSuites: v.tlsCipherSuites,
    },
    authentication: {
      kubeconfig: orUndefined(v.authenticationKubeconfig),
      skipLookup: v.authenticationSkipLookup,
      tolerateLookupFailure: v.authenticationTolerateLookupFailure,
      tokenWebhookCacheTtl: v.authenticationTokenWebhookCacheTtl.ms,
      clientCaFile: orUndefined(v.clientCaFile),
      requestheaderClientCaFile: orUndefined(v.requestheaderClientCaFile),
      requestheaderAllowedNames: v.requestheaderAllowedNames,
      requestheaderUsernameHeaders: v.requestheaderUsernameHeaders,
      requestheaderGroupHeaders: v.requestheaderGroupHeaders,
      requestheaderExtraHeadersPrefix: v.requestheaderExtraHeadersPrefix,
    },
    authorization: {
      kubeconfig: orUndefined(v.authorizationKubeconfig),
      alwaysAllowPaths: v.authorizationAlwaysAllowPaths,
      webhookCacheAuthorizedTtl: v.authorizationWebhookCacheAuthorizedTtl.ms,
      webhookCacheUnauthorizedTtl: v.authorizationWebhookCacheUnauthorizedTtl.ms,
    },
    profiling: v.profiling,
    contentionProfiling: v.contentionProfiling,
    enablePriorityAndFairness: v.enablePriorityAndFairness,
  }));
}

/**
 * Flag combinations that parse but cannot serve: fatal at startup (exit 1). The e2b checks apply only
 * when the surface is enabled; its flags always parse.
 */
export function checkApiserverConfig(config: ApiserverConfig): void {
  if ((config.serving.tlsCertFile === undefined) !== (config.serving.tlsPrivateKeyFile === undefined)) {
    throw new StartupError("--tls-cert-file and --tls-private-key-file must be set together", {
      flag: config.serving.tlsCertFile === undefined ? "--tls-cert-file" : "--tls-private-key-file",
    });
  }
  if (config.enableE2bApi) checkE2bOptions(config.e2b);
}

/**
 * Flags set to a value this server cannot honour, accepted so that upstream argument lists keep working
 * (docs/serving.md "Accepted without effect"): one warning each at startup.
 */
export function inertFlagWarnings(config: ApiserverConfig): { flag: string; message: string }[] {
  const out: { flag: string; message: string }[] = [];
  if (config.contentionProfiling) {
    out.push({
      flag: "--contention-profiling",
      message: "--contention-profiling is accepted for compatibility and has no effect: Bun has no block/contention profiler",
    });
  }
  if (config.enablePriorityAndFairness) {
    out.push({
      flag: "--enable-priority-and-fairness",
      message: "--enable-priority-and-fairness is accepted for compatibility and has no effect: requests are not queued by priority level",
    });
  }
  return out;
}

export function apiserverHelp(): string {
  return formatHelp({
    name: "sandbox-apiserver",
    summary: "aggregated apiserver serving sandboxes from NodeInventory, with the warm-pool driver and the optional e2b surface",
    table: apiserverFlags,
    envOnly: [
      operatorLogLevelHelp,
      kubeconfigHelp,
    ],
  });
}
