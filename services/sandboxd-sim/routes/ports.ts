// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// GET /v1/sandboxes/{id}/ports/{port}: the checks of the ports relay. The byte splice itself needs the raw
// socket, so it happens in http/relay.ts; this handler decides, and on success answers an internal marker
// response (RELAY_MARKER header naming the guest upstream) that the socket layer turns into 101 + splice.
// Order of checks: 400 port -> 401 missing bearer -> 404 unknown/wrong token -> 426 no upgrade -> 409 state.
//
// With the sandbox token the relay is active: a hibernated or archived sandbox wakes transparently and activity
// is stamped. With the root token it is passive: never wakes, never stamps; a paused sandbox answers 409.
import type { Hono } from "hono";
import { sandboxScoped } from "../auth.ts";
import { SimError, conflict } from "../errors.ts";
import type { SimNode } from "../node.ts";
import { bearer, type SimEnv } from "./body.ts";

export const RELAY_MARKER = "x-sandboxd-sim-relay";

function wantsUpgrade(upgrade: string | undefined, connection: string | undefined): boolean {
  const conn = (connection ?? "").toLowerCase().split(",").map((s) => s.trim());
  return (upgrade ?? "").toLowerCase() === "tcp" && conn.includes("upgrade");
}

export function registerPorts(app: Hono<SimEnv>, node: SimNode): void {
  app.get("/v1/sandboxes/:id/ports/:port", (c) => {
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
      node.wakeOnAccess(sandbox);
    }
    // An upstream attached to this sandbox wins; then its guest agent (guest/host.ts) when the node runs them;
    // then one attached under the id "*", which serves that port of every sandbox without a guest of its own.
    const guest = node.guests.get(`${sandbox.id}:${port}`) ?? node.guestHost?.target(sandbox.id, port) ?? node.guests.get(`*:${port}`);
    // No attached guest upstream is the same as a guest port nobody listens on.
    const target = guest ? `${guest.host}:${guest.port}` : "";
    return c.body(null, 200, { [RELAY_MARKER]: target });
  });
}
