// vk-sandbox's flag table (seed 000 is the authority on names, environment variables and defaults) and
// the typed configuration the daemon runs from. No config file: every flag but the tuning knobs takes
// its default from an environment variable so the systemd unit can run from an EnvironmentFile.
import {
  boolFlag,
  durationFlag,
  floatFlag,
  formatHelp,
  intFlag,
  invalidFlag,
  listenAddressCheck,
  listenPort,
  mapOutcome,
  parseFlags,
  quantityFlag,
  stringFlag,
  type CliOutcome,
  type Env,
  type Quantity,
} from "#shared/config/index.ts";

import { INVENTORY_FORMATS, type InventoryFormat } from "./inventory/index.ts";

export const VK_LOG_LEVEL_ENV = "VK_LOG_LEVEL";

export const vkSandboxFlags = {
  nodeName: stringFlag({
    flag: "node-name",
    env: "VK_NODE_NAME",
    default: "vk-sandboxd",
    help: "Virtual node name. Must differ from the physical Kubernetes node and any co-located vk-cocoon node",
  }),
  nodeIp: stringFlag({
    flag: "node-ip",
    env: "VK_NODE_IP",
    help: "Node InternalIP advertised to the apiserver. Omitted from node addresses when empty",
  }),
  listenAddr: stringFlag({
    flag: "listen-addr",
    env: "VK_LISTEN_ADDR",
    default: ":10260",
    help: "Kubelet API listen address. Must differ from a co-located vk-cocoon, which uses :10250",
    check: listenAddressCheck(false),
  }),
  tlsCert: stringFlag({ flag: "tls-cert", env: "VK_TLS_CERT", help: "Kubelet API TLS certificate" }),
  tlsKey: stringFlag({ flag: "tls-key", env: "VK_TLS_KEY", help: "Kubelet API TLS key" }),
  clientCaFile: stringFlag({
    flag: "client-ca-file",
    env: "VK_CLIENT_CA_FILE",
    help:
      "CA bundle that verifies kubelet API client certificates (the apiserver's --kubelet-client-certificate); " +
      "unset: only bearer tokens (TokenReview) are accepted. Every caller also needs a SubjectAccessReview on nodes/<sub>",
  }),
  nodeCpu: quantityFlag({
    flag: "node-cpu",
    env: "VK_NODE_CPU",
    default: "4000",
    help: "Advertised node CPU capacity (a scheduling budget only)",
  }),
  nodeMemory: quantityFlag({
    flag: "node-memory",
    env: "VK_NODE_MEMORY",
    default: "8Ti",
    help: "Advertised node memory capacity",
  }),
  nodePods: quantityFlag({
    flag: "node-pods",
    env: "VK_NODE_PODS",
    default: "2000",
    help: "Advertised node max pods",
  }),
  kubeApiQps: floatFlag({
    flag: "kube-api-qps",
    default: "200",
    help:
      "client-go QPS for the Kubernetes clients (status pushes, delete authorization, inventory publish), and " +
      "the rate of the pod create, delete and status queues. 0 means client-go's 5; negative disables the limit",
  }),
  kubeApiBurst: intFlag({
    flag: "kube-api-burst",
    default: "400",
    help: "client-go burst on top of --kube-api-qps, and the burst of the pod queues. 0 means client-go's 10",
  }),
  sandboxdUrl: stringFlag({
    flag: "sandboxd-url",
    env: "SANDBOXD_URL",
    default: "http://127.0.0.1:7777",
    help: "sandboxd base URL",
  }),
  sandboxdAdvertiseAddr: stringFlag({
    flag: "sandboxd-advertise-addr",
    env: "SANDBOXD_ADVERTISE_ADDR",
    defaultLabel: "host:port of --sandboxd-url",
    help: "host:port published in NodeInventory for claim routing",
  }),
  sandboxdTokenFile: stringFlag({
    flag: "sandboxd-token-file",
    env: "SANDBOXD_TOKEN_FILE",
    help: "File holding the sandboxd node API token (surrounding whitespace trimmed)",
  }),
  statePath: stringFlag({
    flag: "state-path",
    env: "VK_STATE_PATH",
    default: "/var/lib/vk-sandbox/claims.json",
    help:
      "Claims table persistence path. Required: the binary refuses to start without one, because a node " +
      "serving real Pods would leak a microVM per claim on restart",
  }),
  orphanScanInterval: durationFlag({
    flag: "orphan-scan-interval",
    default: "60s",
    help: "Audit-only orphan scan cadence; 0 disables the scan",
  }),
  publishInventory: boolFlag({
    flag: "publish-inventory",
    help: "Server-side-apply this node's NodeInventory for the L3 aggregation layer, stamped with publishedAt",
  }),
  // Go crashed on a non-positive ticker; the project decision makes it a usage error up front.
  publishInterval: durationFlag({
    flag: "publish-interval",
    default: "30s",
    positive: true,
    help: "NodeInventory publish cadence; keep it below the apiserver's --inventory-stale-after",
  }),
  // Beyond the seed (docs/inventory.md): how the inventory is laid out, and when a node warns of its size.
  inventoryFormat: stringFlag({
    flag: "inventory-format",
    env: "VK_INVENTORY_FORMAT",
    default: "sharded",
    check: (v) => ((INVENTORY_FORMATS as readonly string[]).includes(v) ? undefined : `must be one of ${INVENTORY_FORMATS.join(", ")}`),
    help:
      "NodeInventory layout: sharded (rows in NodeInventoryShard objects, any size) or single (the seed's one object, " +
      "which upstream Go readers understand; it fails past about 1.5 MiB)",
  }),
  inventoryWarnBytes: intFlag({
    flag: "inventory-warn-bytes",
    default: "524288",
    min: 1024,
    help: "Warn (log line, Event on the Node, metric) when one inventory object passes this many bytes",
  }),
  nodeLabels: stringFlag({
    flag: "node-labels",
    default: "sandbox.cocoonstack.io/runtime=sandboxd",
    help: "Comma-separated extra node labels, key=value",
  }),
  disablePodEvents: boolFlag({
    flag: "disable-pod-events",
    help:
      "Drop the pod controller's Normal events (one per pod create, update and delete); warnings still reach " +
      "the apiserver",
  }),
} as const;

/** Everything vk-sandbox runs from, resolved and validated. Durations are milliseconds. */
export interface VkSandboxConfig {
  nodeName: string;
  /** Undefined when unset: the node then advertises only its Hostname address. */
  nodeIp: string | undefined;
  listenAddr: string;
  /** The port parsed out of listenAddr (DaemonEndpoints.kubeletEndpoint.port). */
  listenPort: number;
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  /** Undefined when unset: the kubelet API then asks for no client certificate. */
  clientCaFile: string | undefined;
  nodeCpu: Quantity;
  nodeMemory: Quantity;
  nodePods: Quantity;
  kubeApiQps: number;
  kubeApiBurst: number;
  /** Without trailing slashes. */
  sandboxdUrl: string;
  /** The flag, or the host[:port] of sandboxdUrl when unset (§1). */
  sandboxdAdvertiseAddr: string;
  sandboxdTokenFile: string | undefined;
  statePath: string;
  /** Milliseconds; 0 or less disables the scan. */
  orphanScanInterval: number;
  publishInventory: boolean;
  /** Milliseconds, always positive. */
  publishInterval: number;
  inventoryFormat: InventoryFormat;
  inventoryWarnBytes: number;
  /** The --node-labels pairs, parsed per §2.1 (the fixed labels are added by the node builder). */
  nodeLabels: Record<string, string>;
  disablePodEvents: boolean;
}

/**
 * Spec §2.1: split on ",", trim each item, cut at the first "=", skip items without "=" or with an empty
 * key; an empty value is allowed and later duplicates win.
 */
export function parseNodeLabels(raw: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const item of raw.split(",")) {
    const trimmed = item.trim();
    const eq = trimmed.indexOf("=");
    if (eq <= 0) continue;
    labels[trimmed.slice(0, eq)] = trimmed.slice(eq + 1);
  }
  return labels;
}

/**
 * The advertise default of §1: the URL's host, with its port only when the URL names one. A value
 * that is not a URL with a host is used raw, minus trailing slashes. Parsed by hand because WHATWG URL
 * drops a scheme's default port (`http://h:80` → `h`), which Go's url.Parse keeps.
 */
export function advertiseAddrFromUrl(url: string): string {
  const raw = url.replace(/\/+$/, "");
  const m = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/.exec(raw);
  if (!m) return raw;
  const authority = m[1]!;
  const host = authority.slice(authority.lastIndexOf("@") + 1);
  return host === "" ? raw : host;
}

const orUndefined = (value: string): string | undefined => (value === "" ? undefined : value);

export function parseVkSandboxFlags(argv: readonly string[], env: Env): CliOutcome<VkSandboxConfig> {
  return mapOutcome(parseFlags(vkSandboxFlags, argv, env), ({ values: v, sources }) => {
    // An empty VK_STATE_PATH is unset (the default applies); an explicit empty flag is refused, because
    // running without durable claims leaks one microVM per claim on the next restart.
    if (v.statePath === "" && sources.statePath === "flag") {
      throw invalidFlag("state-path", "", "must not be empty: the claims table must be persisted");
    }
    const sandboxdUrl = v.sandboxdUrl.replace(/\/+$/, "");
    return {
      nodeName: v.nodeName,
      nodeIp: orUndefined(v.nodeIp),
      listenAddr: v.listenAddr,
      listenPort: listenPort(v.listenAddr),
      tlsCert: orUndefined(v.tlsCert),
      tlsKey: orUndefined(v.tlsKey),
      clientCaFile: orUndefined(v.clientCaFile),
      nodeCpu: v.nodeCpu,
      nodeMemory: v.nodeMemory,
      nodePods: v.nodePods,
      kubeApiQps: v.kubeApiQps,
      kubeApiBurst: v.kubeApiBurst,
      sandboxdUrl,
      sandboxdAdvertiseAddr: v.sandboxdAdvertiseAddr === "" ? advertiseAddrFromUrl(sandboxdUrl) : v.sandboxdAdvertiseAddr,
      sandboxdTokenFile: orUndefined(v.sandboxdTokenFile),
      statePath: v.statePath,
      orphanScanInterval: v.orphanScanInterval.ms,
      publishInventory: v.publishInventory,
      publishInterval: v.publishInterval.ms,
      inventoryFormat: v.inventoryFormat as InventoryFormat,
      inventoryWarnBytes: v.inventoryWarnBytes,
      nodeLabels: parseNodeLabels(v.nodeLabels),
      disablePodEvents: v.disablePodEvents,
    };
  });
}

export function vkSandboxHelp(): string {
  return formatHelp({
    name: "vk-sandbox",
    summary: "virtual kubelet whose Pods are warm microVMs claimed from this node's sandboxd",
    table: vkSandboxFlags,
    envOnly: [
      {
        env: VK_LOG_LEVEL_ENV,
        default: "info",
        help: "Log level: debug, info, warn or error; an unknown level stops startup",
      },
      { env: "KUBECONFIG", default: "none", help: "Kubeconfig used only when in-cluster configuration is unavailable" },
    ],
  });
}
