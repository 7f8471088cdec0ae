// The read-path Sandbox: synthesized from one NodeInventory entry (docs/api.md "Read-path object"). Nothing is
// stored; two reads of the same entry render the same object, and the resourceVersion is a content hash, so equal
// content means equal version (the watch diff relies on it).
import type { InventoryEntry } from "#shared/inventory/index.ts";
import { parseWireTime } from "#shared/sandboxd/index.ts";

export const GROUP = "agents.x-k8s.io";
export const VERSION = "v1beta1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = "Sandbox";
export const LIST_KIND = "SandboxList";
export const RESOURCE = "sandboxes";

const P = "sandbox.cocoonstack.io";
export const LABEL_NODE = `${P}/node`;
export const LABEL_PHASE = `${P}/phase`;
export const LABEL_TEMPLATE = `${P}/template`;
export const LABEL_CLAIM = `${P}/claim`;
export const ANN_CLAIM_ID = `${P}/claim-id`;
export const ANN_DEADLINE = `${P}/deadline`;
export const ANN_METADATA = `${P}/metadata`;
export const ANN_CPU_COUNT = `${P}/cpu-count`;
export const ANN_MEMORY_BYTES = `${P}/memory-bytes`;
export const ANN_ADDRESS = `${P}/address`;
export const ANN_TOKEN = `${P}/token`;
export const ANN_NET = `${P}/net`;
export const ANN_TTL_SECONDS = `${P}/ttl-seconds`;

export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime?: string;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string | null;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [k: string]: unknown;
}

export interface Sandbox {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Record<string, unknown>;
  status: { nodeName?: string; podIPs?: string[]; conditions?: Condition[]; [k: string]: unknown };
}

/** `<ns>/<name>` split at the first `/`; no `/` means namespace `default`. */
export function splitEntryName(name: string): { namespace: string; name: string } {
  const i = name.indexOf("/");
  return i < 0 ? { namespace: "default", name } : { namespace: name.slice(0, i), name: name.slice(i + 1) };
}

/** RFC 3339 UTC with whole seconds, as Go's metav1.Time marshals. */
export function rfc3339Seconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function wireMs(s: string | undefined): number | undefined {
  if (!s) return undefined;
  try {
    return parseWireTime(s) ?? undefined;
  } catch {
    return undefined;
  }
}

/** The host of `addr` after dropping any `scheme://` and the port; the raw value when it is not host:port. */
export function hostOf(addr: string): string {
  const a = addr.replace(/^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//, "").replace(/\/.*$/, "");
  const bracket = /^\[([^\]]+)\]:\d+$/.exec(a);
  if (bracket) return bracket[1]!;
  const m = /^([^:]+):\d+$/.exec(a);
  return m ? m[1]! : addr;
}

/** spec.operatingMode values (operating-mode.ts; here so this module stays free of imports that reach ../api). */
export type OperatingMode = "Running" | "Suspended";

/** The mode a node phase means: Hibernated (paused, asleep, archived) is Suspended; other phases have none. */
export function modeOfPhase(phase: string | undefined): OperatingMode | undefined {
  if (phase === "Hibernated") return "Suspended";
  if (phase === "Running") return "Running";
  return undefined;
}

export function isReadyPhase(phase: string): boolean {
  const p = phase.toLowerCase();
  return p === "running" || p === "ready";
}

export function sandboxFromEntry(entry: InventoryEntry, node: string): Sandbox {
  const { namespace, name } = splitEntryName(entry.name);
  const labels: Record<string, string> = { [LABEL_NODE]: node };
  if (entry.phase) labels[LABEL_PHASE] = entry.phase;
  if (entry.template) labels[LABEL_TEMPLATE] = entry.template;
  if (entry.claimRef) labels[LABEL_CLAIM] = splitEntryName(entry.claimRef).name;

  const annotations: Record<string, string> = {};
  if (entry.id) annotations[ANN_CLAIM_ID] = entry.id;
  const deadlineMs = wireMs(entry.deadline);
  const deadline = deadlineMs === undefined ? "" : rfc3339Seconds(deadlineMs);
  if (deadline) annotations[ANN_DEADLINE] = deadline;
  if (entry.claimMetadata) annotations[ANN_METADATA] = entry.claimMetadata;
  if (entry.cpuCount && entry.cpuCount > 0) annotations[ANN_CPU_COUNT] = String(entry.cpuCount);
  if (entry.memoryBytes && entry.memoryBytes > 0) annotations[ANN_MEMORY_BYTES] = String(entry.memoryBytes);

  const claimedMs = wireMs(entry.claimedAt);
  const metadata: ObjectMeta = {
    name,
    namespace,
    resourceVersion: resourceVersionOf(entry, namespace, name, deadline, claimedMs),
    ...(claimedMs === undefined ? {} : { creationTimestamp: rfc3339Seconds(claimedMs) }),
    labels,
    ...(Object.keys(annotations).length ? { annotations } : {}),
  };
  const phase = entry.phase ?? "";
  // spec.operatingMode is read back from the node's phase (operating-mode.ts): a sandbox paused through any path,
  // or asleep by itself, is Suspended.
  const mode = modeOfPhase(phase);
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata,
    spec: mode ? { operatingMode: mode } : {},
    status: {
      nodeName: node,
      ...(entry.addr ? { podIPs: [hostOf(entry.addr)] } : {}),
      conditions: [
        {
          type: "Ready",
          status: isReadyPhase(phase) ? "True" : "False",
          reason: phase || "Unknown",
          message: `phase "${phase}" reported by node "${node}" inventory`,
        },
        ...(mode
          ? [
              {
                type: "Suspended",
                status: mode === "Suspended" ? ("True" as const) : ("False" as const),
                reason: mode === "Suspended" ? "Hibernated" : "Running",
                message:
                  mode === "Suspended"
                    ? `node "${node}" hibernated the sandbox (paused, operatingMode Suspended, or idle in a pool that sleeps); the next request with its token, or operatingMode Running, wakes it`
                    : `running on node "${node}"`,
              },
            ]
          : []),
      ],
    },
  };
}

function resourceVersionOf(e: InventoryEntry, ns: string, name: string, deadline: string, claimedMs: number | undefined): string {
  const parts = [
    `${ns}/${name}`,
    e.id ?? "",
    e.phase ?? "",
    e.claimRef ?? "",
    e.addr ?? "",
    e.template ?? "",
    deadline,
    claimedMs === undefined ? "" : String(Math.floor(claimedMs / 1000)),
  ];
  return fnv1a64(parts.join("|"));
}

/**
 * FNV-1a 64-bit of the UTF-8 bytes, as a decimal string. Four 16-bit limbs instead of BigInt arithmetic per byte,
 * and UTF-8 encoded on the fly from the UTF-16 code units: a node's sandboxes are rendered whenever its inventory
 * changes, so this runs for every entry of the fleet.
 */
export function fnv1a64(s: string): string {
  // offset basis 0xcbf29ce484222325
  let h0 = 0x2325, h1 = 0x8422, h2 = 0x9ce4, h3 = 0xcbf2;
  const mix = (b: number) => {
    h0 ^= b;
    // × prime 0x100000001b3 = ×0x1b3 + ×2^40 (mod 2^64)
    const v0 = h0 * 0x1b3;
    const v1 = h1 * 0x1b3 + (v0 >>> 16);
    const v2 = h2 * 0x1b3 + (h0 << 8) + (v1 >>> 16);
    const v3 = h3 * 0x1b3 + (h1 << 8) + (v2 >>> 16);
    h0 = v0 & 0xffff;
    h1 = v1 & 0xffff;
    h2 = v2 & 0xffff;
    h3 = v3 & 0xffff;
  };
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      mix(c);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const lo = s.charCodeAt(i + 1);
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
        i++;
      }
    }
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd; // a lone surrogate encodes as U+FFFD, as TextEncoder does
    if (c < 0x800) {
      mix(0xc0 | (c >> 6));
      mix(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      mix(0xe0 | (c >> 12));
      mix(0x80 | ((c >> 6) & 0x3f));
      mix(0x80 | (c & 0x3f));
    } else {
      mix(0xf0 | (c >> 18));
      mix(0x80 | ((c >> 12) & 0x3f));
      mix(0x80 | ((c >> 6) & 0x3f));
      mix(0x80 | (c & 0x3f));
    }
  }
  return decimal64([h3, h2, h1, h0]);
}

/** The decimal digits of a 64-bit value given as four 16-bit limbs, most significant first (no BigInt). */
function decimal64(limbs: number[]): string {
  let out = "";
  while (limbs.some((l) => l !== 0)) {
    // Long division of the limbs by 10,000: four decimal digits per pass.
    let r = 0;
    for (let i = 0; i < limbs.length; i++) {
      const cur = r * 0x10000 + limbs[i]!;
      limbs[i] = Math.floor(cur / 10000);
      r = cur % 10000;
    }
    const chunk = String(r);
    out = (limbs.some((l) => l !== 0) ? "0000".slice(chunk.length) + chunk : chunk) + out;
  }
  return out || "0";
}
