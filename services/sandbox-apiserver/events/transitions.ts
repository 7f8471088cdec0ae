// What happened to a sandbox between two inventory states (docs/events.md): one change of the fleet's holders
// (sandboxes/changes.ts) becomes at most one lifecycle transition — claimed, paused, resumed, released, lost, or
// recovered after a loss. Pure: the caller says which nodes were fresh before and after the change.
import type { Sandbox, SandboxChange } from "../sandboxes/index.ts";

export type TransitionReason = "Claimed" | "Paused" | "Resumed" | "Released" | "Lost" | "Recovered";

export interface Transition {
  sandbox: Sandbox;
  type: "Normal" | "Warning";
  reason: TransitionReason;
  message: string;
}

const PHASE = "sandbox.cocoonstack.io/phase";
const CLAIM_ID = "sandbox.cocoonstack.io/claim-id";

export interface FleetMoment {
  /** Node names fresh before the change. */
  freshBefore: ReadonlySet<string>;
  /** Node names fresh after it. */
  freshAfter: ReadonlySet<string>;
  /** Was this `<ns>/<name>` reported Lost earlier (so its return is a recovery, not a claim)? */
  wasLost(key: string): boolean;
}

const phaseOf = (s: Sandbox) => s.metadata.labels?.[PHASE] ?? "";
const idOf = (s: Sandbox) => s.metadata.annotations?.[CLAIM_ID];
const claim = (s: Sandbox) => (idOf(s) ? ` (claim id ${idOf(s)})` : "");

/**
 * The transition one change means, if any. The reported copy is the last in node order, as a watch reports it. A
 * sandbox appearing on a node that was not fresh before is a node (re)joining, not a claim: silent unless it had been
 * reported lost. A sandbox gone while its node is still fresh was released; gone with its node stale or deleted, lost.
 */
export function transitionOf(c: SandboxChange, m: FleetMoment): Transition | undefined {
  const before = c.before.at(-1);
  const after = c.after.at(-1);
  if (!before && after) {
    const node = after.status.nodeName ?? "";
    if (m.wasLost(c.key)) return { sandbox: after, type: "Normal", reason: "Recovered", message: `node "${node}" publishes the sandbox again${claim(after)}` };
    if (!m.freshBefore.has(node)) return undefined;
    return { sandbox: after, type: "Normal", reason: "Claimed", message: `claimed on node "${node}"${claim(after)}` };
  }
  if (before && !after) {
    const node = before.status.nodeName ?? "";
    if (m.freshAfter.has(node)) return { sandbox: before, type: "Normal", reason: "Released", message: `released by node "${node}"${claim(before)}` };
    return {
      sandbox: before,
      type: "Warning",
      reason: "Lost",
      message: `node "${node}" no longer publishes a fresh inventory (stale or removed); the sandbox is not served until it does${claim(before)}`,
    };
  }
  if (before && after) {
    const was = phaseOf(before);
    const now = phaseOf(after);
    const node = after.status.nodeName ?? "";
    if (was === "Running" && now === "Hibernated") return { sandbox: after, type: "Normal", reason: "Paused", message: `hibernated on node "${node}"${claim(after)}` };
    if (was === "Hibernated" && now === "Running") return { sandbox: after, type: "Normal", reason: "Resumed", message: `woken on node "${node}"${claim(after)}` };
  }
  return undefined;
}
