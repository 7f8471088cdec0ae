// The pool key (template, net, size) of a pod template: one derivation shared by Create and the warm-pool driver
// (docs/api.md "Pool key"), so an object created from a template claims from the pool the driver keeps warm.
import { parseQuantity } from "#shared/config/index.ts";
import { NETS, type PoolKey } from "#shared/sandboxd/index.ts";

interface ResourceList {
  cpu?: unknown;
  memory?: unknown;
}

export interface PodTemplateLike {
  metadata?: { annotations?: Record<string, string> };
  spec?: { containers?: { image?: string; resources?: { requests?: ResourceList; limits?: ResourceList } }[] };
}

const GI = 1024 ** 3;

export class PoolKeyError extends Error {
  override name = "PoolKeyError";
}

/** A quantity in milli-units (cpu) or bytes (memory); 0 when absent. A malformed one is the caller's 400. */
function quantity(v: unknown, field: string, milli: boolean): number {
  if (v === undefined || v === null || v === "") return 0;
  const s = typeof v === "number" ? String(v) : typeof v === "string" ? v : undefined;
  if (s === undefined) throw new PoolKeyError(`${field}: not a quantity: ${JSON.stringify(v)}`);
  try {
    const q = parseQuantity(s);
    return milli ? q.milliValue : q.value;
  } catch (e) {
    throw new PoolKeyError(`${field}: ${(e as Error).message}`);
  }
}

/**
 * CPU is requests.cpu, or limits.cpu when the request is absent or zero; memory likewise and independently.
 * `large` above 4 CPUs or 8Gi, `medium` above 1 CPU or 2Gi, else `small`.
 */
export function sizeOf(resources: { requests?: ResourceList; limits?: ResourceList } | undefined, path: string): PoolKey["size"] {
  const req = resources?.requests ?? {};
  const lim = resources?.limits ?? {};
  let cpuMilli = quantity(req.cpu, `${path}.requests.cpu`, true);
  if (cpuMilli === 0) cpuMilli = quantity(lim.cpu, `${path}.limits.cpu`, true);
  let mem = quantity(req.memory, `${path}.requests.memory`, false);
  if (mem === 0) mem = quantity(lim.memory, `${path}.limits.memory`, false);
  if (cpuMilli > 4000 || mem > 8 * GI) return "large";
  if (cpuMilli > 1000 || mem > 2 * GI) return "medium";
  return "small";
}

/**
 * `template` = image of container 0 ("" without containers); `net` = the first non-empty of `netAnnotations`
 * (Create passes the object's then the pod template's; the driver only the template's), else `none`.
 */
export function poolKeyOf(podTemplate: PodTemplateLike | undefined, netAnnotations: (string | undefined)[], path: string): PoolKey {
  const c0 = podTemplate?.spec?.containers?.[0];
  const net = netAnnotations.find((n) => n !== undefined && n !== "") ?? "none";
  // Refused here, not by the node: a 400 naming the annotation beats a node's 400 surfacing as a claim failure.
  if (!(NETS as readonly string[]).includes(net)) {
    throw new PoolKeyError(`invalid sandbox.cocoonstack.io/net="${net}": want one of ${NETS.join(", ")}`);
  }
  return {
    template: c0?.image ?? "",
    net: net as PoolKey["net"],
    size: sizeOf(c0?.resources, `${path}.spec.containers[0].resources`),
  };
}
