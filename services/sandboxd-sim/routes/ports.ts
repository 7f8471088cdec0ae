// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// GET /v1/sandboxes/{id}/ports/{port}: the checks of the ports relay. The byte splice itself needs the raw
// socket, so it happens in http/relay.ts; this handler decides, and on success answers an internal marker
// response (RELAY_MARKER header naming the guest upstream) that the socket layer turns into 101 + splice.
// Order of checks: 400 port -> 401 missing bearer -> 404 unknown/wrong token -> 426 no upgrade -> 409 state.
//
// With the sandbox token the relay is active: a hibernated or archived sandbox wakes transparently and activity
// is stamped, and the open relay holds the idle clock until it closes. With the root token it is passive: never wakes, never stamps; a paused sandbox answers 409.
import type { Hono } from "hono";
import { sandboxScoped } from "../auth.ts";
import { SimError, conflict } from "../errors.ts";
import { agentKey, type SimNode } from "../node.ts";
import { bearer, type SimEnv } from "./body.ts";

export const RELAY_MARKER = "x-sandboxd-sim-relay";
/** On an active (sandbox-token) relay: the claim whose idle clock the open relay holds (idle.ts). */
export const RELAY_HOLD = "x-sandboxd-sim-relay-hold";
/** The Upgrade protocol the 101 names: `tcp` for the ports relay, `silkd` for the agent relay. */
export const RELAY_PROTOCOL = "x-sandboxd-sim-relay-protocol";


function wantsUpgrade(upgrade: string | undefined, connection: string | undefined, protocol = "tcp"): boolean {
  const conn = (connection ?? "").toLowerCase().split(",").map((s) => s.trim());
  return (upgrade ?? "").toLowerCase() === protocol && conn.includes("upgrade");
}

export function registerPorts(app: Hono<SimEnv>, node: SimNode): void {
  app.get("/v1/sandboxes/:id/ports/:port", async (c) => {
    const portText = c.req.param("port");
    const port = Number(portText);
    if (!/^\d+$/.test(portText) || port < 1 || port > 65535) throw new SimError(400, "port must be 1-65535");
    const { sandbox, operator } = sandboxScoped(node.tokens, bearer(c), node.table.get(c.req.param("id")), { operator: true });
    if (!wantsUpgrade(c.req.header("upgrade"), c.req.header("connection")) || !c.env?.raw?.upgradable) {
      throw new SimError(426, "upgrade required");
    }
    if (sandbox.state === "failed") throw conflict("sandbox failed");
    if (operator) {
      if (sandbox.state === "hibernated" || sandbox.state === "archived") throw conflict("sandbox is paused");
    } else {
      // Waits for the wake (slowWake); every relay to a sandbox mid-wake shares that one wake.
      await node.wake(sandbox, { access: true });
    }
    // An upstream attached to this sandbox wins; then its guest agent (guest/host.ts) when the node runs them;
    // then one attached under the id "*", which serves that port of every sandbox without a guest of its own.
    const guest = node.guests.get(`${sandbox.id}:${port}`) ?? node.guestHost?.target(sandbox.id, port) ?? node.guests.get(`*:${port}`);
    // No attached guest upstream is the same as a guest port nobody listens on.
    const target = guest ? `${guest.host}:${guest.port}` : "";
    // A passive relay never stamps activity, so it holds nothing.
    return c.body(null, 200, operator ? { [RELAY_MARKER]: target } : { [RELAY_MARKER]: target, [RELAY_HOLD]: sandbox.id });
  });
}

/**
 * GET /v1/sandboxes/{id}/agent (sandboxd.md §5.6): the guest agent's relay, `Upgrade: silkd`, the sandbox's own
 * token only. The simulator has no silkd: it splices to an upstream attached with `attachAgent(id, target)` and
 * answers 502 `guest agent unreachable` without one. What it does simulate is the lifecycle side: it wakes a
 * sleeping sandbox and, while open, holds the idle clock like the ports relay. Check order: 401 missing bearer
 * (before the Upgrade header, as sandboxd) -> 404 unknown/wrong token -> 426 no `Upgrade: silkd` -> 409 failed.
 */
export function registerAgent(app: Hono<SimEnv>, node: SimNode): void {
  app.get("/v1/sandboxes/:id/agent", async (c) => {
    const { sandbox } = sandboxScoped(node.tokens, bearer(c), node.table.get(c.req.param("id")), { operator: false });
    if (!wantsUpgrade(c.req.header("upgrade"), c.req.header("connection"), "silkd") || !c.env?.raw?.upgradable) {
      throw new SimError(426, "upgrade required");
    }
    if (sandbox.state === "failed") throw conflict("sandbox failed");
    await node.wake(sandbox, { access: true });
    const agent = node.guests.get(agentKey(sandbox.id));
    if (!agent) throw new SimError(502, "guest agent unreachable");
    return c.body(null, 200, { [RELAY_MARKER]: `${agent.host}:${agent.port}`, [RELAY_HOLD]: sandbox.id, [RELAY_PROTOCOL]: "silkd" });
  });
}
