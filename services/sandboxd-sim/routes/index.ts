// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// createApp(node): the Hono app of one simulated node, without a listener (tests may call app.request()).
// Handlers only throw; onError shapes every handled failure as sandboxd's `{"error":"…"}`. Router misses are
// Go-ServeMux plain text (routes/table.ts).
import { Hono } from "hono";
import { SimError } from "../errors.ts";
import type { SimNode } from "../node.ts";
import { registerArtefacts } from "./artefacts.ts";
import { registerClaim } from "./claim.ts";
import { registerLifecycle } from "./lifecycle.ts";
import { registerNode } from "./node.ts";
import { registerAgent, registerPorts } from "./ports.ts";
import { registerExec } from "./exec.ts";
import { registerPreview } from "./preview.ts";
import { registerReads } from "./reads.ts";
import { matchRoute, routerMiss } from "./table.ts";
import type { SimEnv } from "./body.ts";

export function createApp(node: SimNode): Hono<SimEnv> {
  const app = new Hono<SimEnv>();
  registerClaim(app, node);
  registerLifecycle(app, node);
  registerReads(app, node);
  registerNode(app, node);
  registerArtefacts(app, node);
  registerPorts(app, node);
  registerAgent(app, node);
  registerExec(app, node);
  registerPreview(app, node);
  app.notFound((c) => routerMiss(matchRoute(c.req.method, new URL(c.req.url).pathname)));
  app.onError((err, c) => {
    if (err instanceof SimError) {
      return c.newResponse(JSON.stringify({ error: err.message }), err.status as 400, { "content-type": "application/json", ...err.headers });
    }
    return c.newResponse(JSON.stringify({ error: `internal error: ${(err as Error).message}` }), 500, { "content-type": "application/json" });
  });
  return app;
}
export { type RawRequest, type SimEnv } from "./body.ts";
export { RELAY_HOLD, RELAY_MARKER, RELAY_PROTOCOL } from "./ports.ts";
export { type RouteName, matchRoute, routerMiss } from "./table.ts";
