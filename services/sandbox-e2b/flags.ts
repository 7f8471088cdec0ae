// sandbox-e2b's flags (e2b.md §7, mesh mode): the e2b surface with no Kubernetes. Nodes come from
// sandboxd seeds; the `--e2b-*` set is the same rows sandbox-apiserver uses (always served here); the
// envd proxy can run in the same process.
import {
  OPERATOR_LOG_LEVEL_ENV,
  StartupError,
  boolFlag,
  checkE2bOptions,
  durationFlag,
  e2bFlags,
  e2bOptionsFrom,
  formatHelp,
  listFlag,
  listenAddressCheck,
  mapOutcome,
  operatorLogLevelHelp,
  parseFlags,
  publicTrafficFlags,
  publicTrafficFrom,
  sandboxdTokenFlags,
  stringFlag,
  type CliOutcome,
  type E2bOptions,
  type Env,
} from "#shared/config/index.ts";
import type { PublicTrafficPolicy } from "#shared/e2b/index.ts";
import { envdProxyRelayLimitFlags, relayLimitsFrom, type RelayLimitOptions } from "#shared/relay/index.ts";

export { OPERATOR_LOG_LEVEL_ENV };

export const e2bMeshFlags = {
  sandboxdSeeds: listFlag({
    flag: "sandboxd-seeds",
    help: "Comma-separated sandboxd addresses to learn the fleet from. Required.",
  }),
  ...sandboxdTokenFlags,
  inventoryPoll: durationFlag({
    flag: "inventory-poll",
    default: "10s",
    positive: true,
    help: "Poll tick of every node's info and sandboxes; a silent node keeps its snapshot 3 ticks, then leaves.",
  }),
  ...e2bFlags,
  envdProxyBindAddress: stringFlag({
    flag: "envd-proxy-bind-address",
    help: "When set, run the envd proxy in-process on this address (namespace filter empty = all).",
    check: (v) => (v === "" ? undefined : listenAddressCheck()(v)),
  }),
  envdProxyTlsCertFile: stringFlag({
    flag: "envd-proxy-tls-cert-file",
    help: "Wildcard certificate for the in-process proxy's *.{--e2b-domain}. Omit to serve cleartext h2c.",
  }),
  envdProxyTlsPrivateKeyFile: stringFlag({
    flag: "envd-proxy-tls-private-key-file",
    help: "Private key for --envd-proxy-tls-cert-file.",
  }),
  envdProxyGuestHttp2: boolFlag({
    flag: "envd-proxy-guest-http2",
    help: "Forward to the guest over cleartext HTTP/2 from the in-process proxy.",
  }),
  // The metrics listener (docs/decisions.md "The proxy's /metrics on its own listener"): one per process, never on
  // the public listeners.
  metricsBindAddress: stringFlag({
    flag: "metrics-bind-address",
    help: "Address of a separate plain-HTTP listener serving only /metrics (the e2b quota series and the in-process proxy's), e.g. :9090. Empty: no metrics listener.",
    check: (v) => (v === "" ? undefined : listenAddressCheck()(v)),
  }),
  ...envdProxyRelayLimitFlags,
  // Public user ports: the rows sandbox-apiserver has too (shared/config).
  ...publicTrafficFlags,
} as const;

export interface E2bMeshConfig {
  /** Trimmed, empty entries dropped. */
  sandboxdSeeds: string[];
  sandboxdToken: string;
  sandboxdTokenFile: string | undefined;
  /** Milliseconds, always positive. */
  inventoryPoll: number;
  e2b: E2bOptions;
  /** Undefined: no in-process proxy. Its domain is --e2b-domain. */
  envdProxy:
    | { bindAddress: string; tlsCertFile: string | undefined; tlsPrivateKeyFile: string | undefined; guestHttp2: boolean; limits: RelayLimitOptions }
    | undefined;
  /** Undefined: no metrics listener. */
  metricsBindAddress: string | undefined;
  /** --public-traffic-default / --forbid-public-traffic: the surface's and the in-process proxy's policy. */
  publicTraffic: PublicTrafficPolicy;
}

const orUndefined = (value: string): string | undefined => (value === "" ? undefined : value);

export function parseE2bMeshFlags(argv: readonly string[], env: Env): CliOutcome<E2bMeshConfig> {
  return mapOutcome(parseFlags(e2bMeshFlags, argv, env), ({ values: v }) => ({
    sandboxdSeeds: v.sandboxdSeeds.map((seed) => seed.trim()).filter((seed) => seed !== ""),
    sandboxdToken: v.sandboxdToken,
    sandboxdTokenFile: orUndefined(v.sandboxdTokenFile),
    inventoryPoll: v.inventoryPoll.ms,
    e2b: e2bOptionsFrom(v),
    envdProxy:
      v.envdProxyBindAddress === ""
        ? undefined
        : {
            bindAddress: v.envdProxyBindAddress,
            tlsCertFile: orUndefined(v.envdProxyTlsCertFile),
            tlsPrivateKeyFile: orUndefined(v.envdProxyTlsPrivateKeyFile),
            guestHttp2: v.envdProxyGuestHttp2,
            limits: relayLimitsFrom({
              maxRelays: v.envdProxyMaxRelays,
              maxRelaysPerSandbox: v.envdProxyMaxRelaysPerSandbox,
              maxRelaysPerClient: v.envdProxyMaxRelaysPerClient,
              maxRelaysPerNamespace: v.envdProxyMaxRelaysPerNamespace,
              maxPublicRelays: v.envdProxyMaxPublicRelays,
              maxPublicRelaysPerSandbox: v.envdProxyMaxPublicRelaysPerSandbox,
              maxPublicRelaysPerClient: v.envdProxyMaxPublicRelaysPerClient,
              relayBufferMax: v.envdProxyRelayBufferMax,
              guestHandshakeTimeout: v.envdProxyGuestHandshakeTimeout,
              wakeTimeout: v.envdProxyWakeTimeout,
              requestBodyMinRate: v.envdProxyRequestBodyMinRate,
              requestBodyRateWindow: v.envdProxyRequestBodyRateWindow,
            }),
          },
    metricsBindAddress: orUndefined(v.metricsBindAddress),
    publicTraffic: publicTrafficFrom(v),
  }));
}

/** Startup failures that need no network: no seed, the e2b surface's own checks, a half TLS pair. */
export function checkE2bMeshConfig(config: E2bMeshConfig): void {
  if (config.sandboxdSeeds.length === 0) {
    throw new StartupError("--sandboxd-seeds is required: name at least one sandboxd address", {
      flag: "--sandboxd-seeds",
    });
  }
  checkE2bOptions(config.e2b);
  const proxy = config.envdProxy;
  if (proxy && (proxy.tlsCertFile === undefined) !== (proxy.tlsPrivateKeyFile === undefined)) {
    throw new StartupError("--envd-proxy-tls-cert-file and --envd-proxy-tls-private-key-file must be set together", {
      flag: proxy.tlsCertFile === undefined ? "--envd-proxy-tls-cert-file" : "--envd-proxy-tls-private-key-file",
    });
  }
}

export function e2bMeshHelp(): string {
  return formatHelp({
    name: "sandbox-e2b",
    summary: "the e2b-compatible surface with no Kubernetes: learns nodes from sandboxd seeds, optionally runs the envd proxy in-process",
    table: e2bMeshFlags,
    envOnly: [
      operatorLogLevelHelp,
    ],
  });
}
