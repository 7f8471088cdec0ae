// Delete (release) and the lifecycle subresources (pause, resume, fork, snapshot): each resolves the sandbox by
// name, then calls its owning node with the fleet token (docs/api.md "Delete" and "Lifecycle"). A node's 404 is a
// 404 naming the claim id; another 4xx keeps its code with the node's message; everything else is a 500.
import { isSandboxdError, type SandboxdError } from "#shared/sandboxd/index.ts";
import { ApiError, badRequest, internal, notFound } from "../api/index.ts";
import type { NodeClients } from "./nodes.ts";
import { type Caller, POD_SNAPSHOT_PREFIX, type PodGuard } from "./pod-guard.ts";
import { ANN_CLAIM_ID, API_VERSION, LABEL_PHASE, type Sandbox, rfc3339Seconds } from "./object.ts";
import { type SubresourceReview, authorizeModeChange, modeOfPhase, requestedMode } from "./operating-mode.ts";
import type { SandboxReader } from "./store.ts";
import { parseWireTime } from "#shared/sandboxd/index.ts";

export interface MutationDeps {
  reader: SandboxReader;
  clients: NodeClients;
  /** A Pod-backed sandbox also needs the matching pod permission (pod-guard.ts). */
  podGuard: PodGuard;
  /** Reviews `create sandboxes/pause|resume` for a spec.operatingMode change (operating-mode.ts); absent = denied. */
  subresourceReview?: SubresourceReview;
}

/**
 * PATCH or PUT of a sandbox (operating-mode.ts): only spec.operatingMode may change; `Suspended` pauses (hibernate),
 * `Running` resumes (wake), with the pause/resume subresource's authorization. The same mode as now is a no-op.
 * Answers the object with the mode asked for (the node's phase follows at its next publish).
 */
export async function setOperatingMode(deps: MutationDeps, caller: Caller | undefined, namespace: string, name: string, contentType: string | undefined, text: string): Promise<Sandbox> {
  const hit = await deps.reader.resolve(namespace, name);
  if (!hit) throw notFound(name);
  const mode = requestedMode(contentType, text, hit.sandbox, name);
  const now = modeOfPhase(hit.sandbox.metadata.labels?.[LABEL_PHASE]);
  if (mode === undefined || mode === now) return hit.sandbox;
  await authorizeModeChange(deps.subresourceReview, caller, namespace, name, mode);
  await runVerb(deps, caller, namespace, name, mode === "Suspended" ? "pause" : "resume", {});
  return { ...hit.sandbox, spec: { ...hit.sandbox.spec, operatingMode: mode } };
}

/** Resolves a sandbox for a delete: its node must be fresh, advertise an address, and the entry carry a claim id. */
async function owned(deps: MutationDeps, caller: Caller | undefined, namespace: string, name: string, action: "delete" | Verb) {
  const what = action === "delete" ? "delete" : "verb";
  const hit = await deps.reader.resolve(namespace, name);
  if (!hit) throw notFound(name);
  const podBacked = await deps.podGuard.check(caller, namespace, name, hit, action);
  const node = hit.node;
  const id = hit.sandbox.metadata.annotations?.[ANN_CLAIM_ID] ?? "";
  if (what === "delete") {
    if (!node) throw internal(`cannot delete sandbox ${namespace}/${name}: inventory entry names no owning node; refusing to report it released`, name);
    if (!id) {
      throw internal(
        `cannot delete sandbox ${namespace}/${name}: node "${node}" inventory carries no ${ANN_CLAIM_ID} (sandboxd claim id); refusing to release by name`,
        name,
      );
    }
  } else {
    if (!node) throw internal(`sandbox ${namespace}/${name} has no owning node; cannot run a lifecycle verb against it`, name);
    if (!id) throw internal(`sandbox ${namespace}/${name} carries no ${ANN_CLAIM_ID} (node-local claim id); refusing to act by name`, name);
  }
  const rec = deps.reader.fleet.freshNode(node);
  if (!rec) throw internal(`sandbox ${namespace}/${name}: node "${node}" has no fresh inventory; cannot reach its sandboxd`, name);
  if (!rec.address) throw internal(`sandbox ${namespace}/${name}: node "${node}" advertises no sandboxd address`, name);
  return { hit, id, node, podBacked, client: deps.clients.for(rec.address) };
}

export async function deleteSandbox(deps: MutationDeps, caller: Caller | undefined, namespace: string, name: string): Promise<Sandbox> {
  const o = await owned(deps, caller, namespace, name, "delete");
  try {
    await o.client.release(o.id); // 404 = already gone = success
  } catch (e) {
    throw internal(`release sandbox ${namespace}/${name} (node "${o.node}" id "${o.id}"): ${(e as Error).message}`, name, e);
  }
  return o.hit.sandbox;
}

export type Verb = "pause" | "resume" | "fork" | "snapshot";
const NODE_VERB: Record<Verb, string> = { pause: "hibernate", resume: "wake", fork: "fork", snapshot: "checkpoint" };

function nodeError(e: unknown, verb: Verb, id: string, node: string, namespace: string, name: string): ApiError {
  if (isSandboxdError(e)) {
    const se = e as SandboxdError;
    const status = se.status;
    if (status === 404 && se.code === "not_found") return notFound(id);
    if (status !== undefined && status >= 400 && status < 500) {
      const text = se.serverMessage ? `: ${se.serverMessage}` : "";
      return new ApiError(status, `sandboxd ${NODE_VERB[verb]} of "${id}" on node "${node}"${text}`, undefined, name);
    }
  }
  return internal(`${verb} sandbox ${namespace}/${name}: ${(e as Error).message}`, name, e);
}

export interface ForkOptions {
  count?: number;
  ttlSeconds?: number;
}

export async function runVerb(
  deps: MutationDeps,
  caller: Caller | undefined,
  namespace: string,
  name: string,
  verb: Verb,
  body: Record<string, unknown>,
): Promise<object> {
  // Validate the body before resolving anything: a bad request never reaches a node.
  let count = 1;
  let ttl: number | undefined;
  let snapName: string | undefined;
  if (verb === "fork") {
    const c = body.count ?? 0;
    if (typeof c !== "number" || !Number.isInteger(c)) throw badRequest(`count must be an integer, got ${JSON.stringify(c)}`, name);
    if (c < 0) throw badRequest(`count must be >= 1, got ${c}`, name);
    count = c === 0 ? 1 : c;
    const t = body.ttlSeconds;
    if (t !== undefined && (typeof t !== "number" || !Number.isInteger(t) || t < 0)) {
      throw badRequest(`ttlSeconds must be a non-negative integer, got ${JSON.stringify(t)}`, name);
    }
    ttl = t as number | undefined;
  }
  if (verb === "snapshot") {
    const n = body.name;
    if (n !== undefined && typeof n !== "string") throw badRequest(`name must be a string, got ${JSON.stringify(n)}`, name);
    snapName = n || undefined;
    if (snapName !== undefined && namespace.length + 1 + snapName.length > 63) {
      throw badRequest(`snapshot name "${snapName}": at most ${63 - namespace.length - 1} characters in namespace "${namespace}"`, name);
    }
  }

  const o = await owned(deps, caller, namespace, name, verb);
  // A Pod-backed sandbox's named snapshot is stamped out of every e2b namespace's reach (pod-guard.ts).
  const stampPrefix = o.podBacked ? POD_SNAPSHOT_PREFIX : "";
  if (snapName !== undefined && stampPrefix.length + namespace.length + 1 + snapName.length > 63) {
    throw badRequest(`snapshot name "${snapName}": at most ${63 - stampPrefix.length - namespace.length - 1} characters for a Pod-backed sandbox in namespace "${namespace}"`, name);
  }
  try {
    switch (verb) {
      case "pause":
        await o.client.hibernate(o.id);
        return { apiVersion: API_VERSION, kind: "SandboxPauseOptions" };
      case "resume":
        await o.client.wake(o.id);
        return { apiVersion: API_VERSION, kind: "SandboxResumeOptions" };
      case "fork": {
        const children = await o.client.fork(o.id, { count, ...(ttl ? { ttl_seconds: ttl } : {}), claim_ref_prefix: `${namespace}/` });
        for (const c of children) deps.reader.remember({ node: o.node, entry: { id: c.id, name: `${namespace}/${c.id}` } }, namespace);
        return {
          apiVersion: API_VERSION,
          kind: "SandboxForkResult",
          children: children.map((c) => ({ sandboxID: c.id, nodeName: o.node, address: c.owner_addr, token: c.token })),
        };
      }
      case "snapshot": {
        const cp = await o.client.checkpoint(o.id, snapName ? { name: `${stampPrefix}${namespace}/${snapName}` } : {});
        const created = parseWireTime(cp.created_at);
        return {
          apiVersion: API_VERSION,
          kind: "SandboxSnapshotResult",
          snapshotID: cp.id,
          ...(snapName ? { name: snapName } : {}),
          nodeName: o.node,
          ...(created ? { creationTimestamp: rfc3339Seconds(created) } : {}),
        };
      }
    }
  } catch (e) {
    throw nodeError(e, verb, o.id, o.node, namespace, name);
  }
}
