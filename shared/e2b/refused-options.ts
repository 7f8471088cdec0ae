// The create options this fleet does not offer, each refused with a 400 that names it and says why (docs/e2b.md
// "Create options not offered"; issue 30 item 5), and `PUT /sandboxes/{id}/network`, which refuses the same egress
// fields in the same words. Nothing the SDKs send is dropped silently: a field is served or refused by name.
//   - egress rules (network.allowOut/denyOut/rules/maskRequestHost/httpsPorts/dnsServers), a BYO egress proxy
//     (network.egressProxy) and secret injection (network.rules transforms with `iam` tokens) are the node's
//     guarded-egress policy, set by the operator per pool and tenant, never per sandbox;
//   - `volumeMounts`: the volume API is not offered, so there is no volume to mount;
//   - `mcp`: MCP servers run in e2b's MCP gateway template, which this fleet does not offer.
import { nameFirst } from "./body.ts";
import { badRequest, type E2bError } from "./errors.ts";

export const EGRESS_POLICY =
  "egress rules, a BYO egress proxy and secret injection are the node's guarded-egress policy, set by the operator per pool and tenant, not per sandbox";

/** Every `network` field the newest SDKs send (JS e2b 2.51, Python e2b 2.63), but allowPublicTraffic, with what it asks for. */
export const EGRESS_FIELDS: Readonly<Record<string, string>> = {
  allowOut: "an egress allow list",
  denyOut: "an egress deny list",
  rules: "per-host egress rules (header transforms, secret injection)",
  egressProxy: "a BYO egress proxy",
  maskRequestHost: "masking the request host on egress",
  httpsPorts: "the ports whose TLS egress rules inspect",
  dnsServers: "the sandbox's DNS servers",
};

const present = (v: unknown) => v !== undefined && v !== null;

/** A field of EGRESS_FIELDS itself (`in` would also answer for "constructor", "toString" … of Object.prototype). */
const isEgressField = (k: string) => Object.hasOwn(EGRESS_FIELDS, k);

/** The refused `network.*` fields present in a body (known ones first, in the SDK's order, then any other). */
function egressFieldsIn(network: Record<string, unknown>, served: readonly string[]): string[] {
  const keys = Object.keys(network).filter((k) => !served.includes(k) && present(network[k]));
  return [...Object.keys(EGRESS_FIELDS).filter((k) => keys.includes(k)), ...keys.filter((k) => !isEgressField(k))];
}

function egressRefusal(prefix: string, fields: string[]): E2bError {
  // At most ten named (a body may hold thousands of keys), each name bounded.
  const what = nameFirst(fields, (f) => `${prefix}${f.slice(0, 100)} (${isEgressField(f) ? EGRESS_FIELDS[f] : "not a network option this server knows"})`, ", ", " ");
  return badRequest(`${what} ${fields.length === 1 ? "is" : "are"} not supported: ${EGRESS_POLICY}; leave ${fields.length === 1 ? "it" : "them"} out (allow_internet_access chooses the egress lane)`);
}

export interface OptionFields {
  network?: Record<string, unknown>;
  iam?: unknown;
  volumeMounts?: unknown;
  mcp?: unknown;
}

const nonEmpty = (v: unknown) =>
  present(v) && !(Array.isArray(v) && v.length === 0) && !(typeof v === "object" && !Array.isArray(v) && Object.keys(v as object).length === 0);

/** The create's first refused option (network fields, iam, volumeMounts, mcp), or null when every one is served. */
export function createOptionRefusal(b: OptionFields): E2bError | null {
  const egress = b.network ? egressFieldsIn(b.network, ["allowPublicTraffic"]) : [];
  if (egress.length > 0) return egressRefusal("network.", egress);
  if (nonEmpty(b.iam)) {
    return badRequest(`iam (workload-identity tokens for egress secret injection) is not supported: ${EGRESS_POLICY}, and this server issues no workload-identity tokens; leave it out`);
  }
  if (nonEmpty(b.volumeMounts)) {
    return badRequest("volumeMounts is not supported: the volume API is not offered by this server (POST /volumes answers 501), so there is no volume to mount; keep files on the sandbox's own disk (a snapshot keeps them)");
  }
  if (nonEmpty(b.mcp)) {
    return badRequest("mcp is not supported: MCP servers run in e2b's MCP gateway template, which this fleet does not offer; create without mcp and start the MCP server you need with commands.run");
  }
  return null;
}

/**
 * `PUT /sandboxes/{id}/network` (JS `Sandbox.updateNetwork`): the update's egress fields are refused as at create;
 * `allow_internet_access` cannot change (the lane is chosen at create), though naming the sandbox's own lane is
 * served. An empty body asks for no per-sandbox rule, which is what every sandbox here has: null (nothing to change).
 */
export function networkUpdateRefusal(body: Record<string, unknown>, hasEgress: boolean): E2bError | null {
  const egress = egressFieldsIn(body, ["allow_internet_access"]);
  if (egress.length > 0) return egressRefusal("", egress);
  if (present(body.allow_internet_access) && body.allow_internet_access !== hasEgress) {
    return badRequest("allow_internet_access cannot change on a running sandbox: the node places a sandbox on its network lane (egress or none) when it is created; create a new sandbox with the access you need");
  }
  return null;
}
