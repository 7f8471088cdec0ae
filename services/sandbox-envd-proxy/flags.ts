// sandbox-envd-proxy's flags (seed 003): the e2b data plane's listener, domain, TLS pair, guest leg,
// the envd secret the access tokens are verified against, the fleet root token, the inventory window and the
// relay's bounds (caps on concurrent relays, the buffer budget, the guest deadline).
import {
  OPERATOR_LOG_LEVEL_ENV,
  StartupError,
  boolFlag,
  formatHelp,
  inventoryStaleAfterFlag,
  inventoryTrustedNetworksFlag,
  kubeconfigHelp,
  listenAddressCheck,
  mapOutcome,
  operatorLogLevelHelp,
  parseFlags,
  sandboxdTokenFlags,
  stringFlag,
  type CliOutcome,
  type Env,
} from "#shared/config/index.ts";
import type { PublicTrafficPolicy } from "#shared/e2b/index.ts";
import { relayLimitFlags, relayLimitsFrom, type RelayLimitOptions } from "#shared/relay/index.ts";

export { OPERATOR_LOG_LEVEL_ENV };

export const envdProxyFlags = {
  bindAddress: stringFlag({
    flag: "bind-address",
    default: ":8443",
    help: "Address the proxy listens on.",
    check: listenAddressCheck(),
  }),
  domain: stringFlag({
    flag: "domain",
    help:
      "Base domain sandbox hosts are derived from, as {port}-{sandboxID}.{domain}. Must match the apiserver's " +
      "--e2b-domain.",
  }),
  namespace: stringFlag({
    flag: "namespace",
    default: "default",
    help:
      "Namespace inventory lookups are filtered to; empty matches every namespace. Not an access boundary: a " +
      "caller holding a sandbox's token reaches it in any namespace.",
  }),
  tlsCertFile: stringFlag({
    flag: "tls-cert-file",
    help: "Wildcard certificate for *.{domain}. Omit to serve cleartext h2c behind an edge that terminates TLS.",
  }),
  tlsPrivateKeyFile: stringFlag({ flag: "tls-private-key-file", help: "Private key for --tls-cert-file." }),
  guestHttp2: boolFlag({
    flag: "guest-http2",
    help:
      "Forward to the guest over cleartext HTTP/2. Off by default: envd 0.8.0 installs no h2c handler and " +
      "refuses it. Clients still reach this proxy over HTTP/2.",
  }),
  e2bEnvdSecretFile: stringFlag({
    flag: "e2b-envd-secret-file",
    help: "The e2b surface's envd secret file; access tokens are verified against it. Required.",
  }),
  ...sandboxdTokenFlags,
  ...inventoryStaleAfterFlag,
  // The metrics listener (spec README, decisions for wave 3): /metrics is not on the public listener.
  metricsBindAddress: stringFlag({
    flag: "metrics-bind-address",
    help: "Address of a separate plain-HTTP listener serving only /metrics (e.g. :9090). Empty: no metrics listener.",
    check: (v) => (v === "" ? undefined : listenAddressCheck()(v)),
  }),
  ...relayLimitFlags,
  ...inventoryTrustedNetworksFlag,
  // Public user ports (docs/decisions.md "Public sandbox ports"): e2b cloud serves a sandbox's user ports with no
  // token unless it was created with network.allowPublicTraffic: false.
  publicTrafficDefault: boolFlag({
    flag: "public-traffic-default",
    default: "true",
    help: "Accepted for symmetry with the e2b surfaces, where it chooses what a create without network.allowPublicTraffic is stamped with; this proxy serves a user port with no token only for a claim stamped public. A claim without the stamp (a Sandbox created through the Kubernetes API, a claim made before the stamp existed) is always private here.",
  }),
  e2bApiUpstream: stringFlag({
    flag: "e2b-api-upstream",
    help: "Base URL of the e2b REST surface (the apiserver's e2b Service, e.g. http://sandbox-apiserver-e2b.sandbox-system:3000): requests for api.{domain} are relayed there, so the SDKs' own https://api.{domain} scheme works through this proxy's one wildcard name and certificate. Empty: api.{domain} is not served.",
    check: (v) => (v === "" || /^https?:\/\/[^/?#]+\/?$/.test(v) ? undefined : "want http(s)://host[:port] with no path"),
  }),
  forbidPublicTraffic: boolFlag({
    flag: "forbid-public-traffic",
    help: "No sandbox port is ever public: every user port needs the envd access token or the traffic access token (the behaviour before issue 20), whatever the create asked.",
  }),
} as const;

export interface EnvdProxyConfig {
  bindAddress: string;
  /** Trimmed; never empty once checkEnvdProxyConfig passed. */
  domain: string;
  /** Empty matches every namespace. */
  namespace: string;
  tlsCertFile: string | undefined;
  tlsPrivateKeyFile: string | undefined;
  guestHttp2: boolean;
  e2bEnvdSecretFile: string | undefined;
  sandboxdToken: string;
  sandboxdTokenFile: string | undefined;
  /** Milliseconds, always positive. */
  inventoryStaleAfter: number;
  /** Undefined: no metrics listener. */
  metricsBindAddress: string | undefined;
  /** Relay caps, buffer budget and guest deadline (docs/envd-relay.md "Bounds"). */
  limits: RelayLimitOptions;
  /** CIDRs, already checked (--inventory-trusted-networks). */
  inventoryTrustedNetworks: string[];
  /** --e2b-api-upstream, without a trailing slash; undefined: api.{domain} is not served. */
  e2bApiUpstream: string | undefined;
  /** --public-traffic-default / --forbid-public-traffic. */
  publicTraffic: PublicTrafficPolicy;
}

const orUndefined = (value: string): string | undefined => (value === "" ? undefined : value);

export function parseEnvdProxyFlags(argv: readonly string[], env: Env): CliOutcome<EnvdProxyConfig> {
  return mapOutcome(parseFlags(envdProxyFlags, argv, env), ({ values: v }) => ({
    bindAddress: v.bindAddress,
    domain: v.domain.trim(),
    namespace: v.namespace,
    tlsCertFile: orUndefined(v.tlsCertFile),
    tlsPrivateKeyFile: orUndefined(v.tlsPrivateKeyFile),
    guestHttp2: v.guestHttp2,
    e2bEnvdSecretFile: orUndefined(v.e2bEnvdSecretFile),
    sandboxdToken: v.sandboxdToken,
    sandboxdTokenFile: orUndefined(v.sandboxdTokenFile),
    inventoryStaleAfter: v.inventoryStaleAfter.ms,
    metricsBindAddress: orUndefined(v.metricsBindAddress),
    limits: relayLimitsFrom(v),
    inventoryTrustedNetworks: v.inventoryTrustedNetworks,
    e2bApiUpstream: orUndefined(v.e2bApiUpstream.replace(/\/$/, "")),
    publicTraffic: { defaultPublic: v.publicTrafficDefault, forbid: v.forbidPublicTraffic },
  }));
}

/**
 * envd-proxy.md §2's startup failures that need no file or network (exit 1, before listening). The
 * secret file's content and the token file's content are checked where they are read.
 */
export function checkEnvdProxyConfig(config: EnvdProxyConfig): void {
  if ((config.tlsCertFile === undefined) !== (config.tlsPrivateKeyFile === undefined)) {
    throw new StartupError("--tls-cert-file and --tls-private-key-file must be set together", {
      flag: config.tlsCertFile === undefined ? "--tls-cert-file" : "--tls-private-key-file",
    });
  }
  if (config.domain === "") throw new StartupError("no domain configured: set --domain", { flag: "--domain" });
  if (config.e2bEnvdSecretFile === undefined) {
    throw new StartupError("--e2b-envd-secret-file is required", { flag: "--e2b-envd-secret-file" });
  }
  if (config.sandboxdTokenFile === undefined && config.sandboxdToken.trim() === "") {
    throw new StartupError("the node token is required: set --sandboxd-token-file or --sandboxd-token", {
      flag: "--sandboxd-token-file",
    });
  }
}

export function envdProxyHelp(): string {
  return formatHelp({
    name: "sandbox-envd-proxy",
    summary: "the e2b data plane: relays {port}-{sandboxID}.{domain} to the owning node's guest port",
    table: envdProxyFlags,
    envOnly: [
      operatorLogLevelHelp,
      kubeconfigHelp,
    ],
  });
}
