// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Node operations (sandboxd.md §5.3–5.5): info, PUT /v1/pools (strict, whole-set), drain/undrain, peers, metrics,
// healthz. Info and the PUT/drain replies are built from live state, so `claimed`/`hibernated`/`archived` always
// agree with the index.
import type { Hono } from "hono";
import { conflict, invalidBody, SimError } from "../errors.ts";
import { metricsText } from "../metrics.ts";
import type { SimNode } from "../node.ts";
import { CONFIG_OWNED_POOL_FIELDS, PutPoolsRequest, duplicatePoolProblem } from "#shared/sandboxd/index.ts";
import { bearer, decode, json, readJson, type SimEnv } from "./body.ts";

export function registerNode(app: Hono<SimEnv>, node: SimNode): void {
  app.get("/v1/info", (c) => {
    node.tokens.rootOnly(bearer(c));
    return json(c, 200, node.info());
  });

  app.put("/v1/pools", async (c) => {
    node.tokens.rootOnly(bearer(c));
    // Config-owned fields get their own text before the generic strict decode names them "unknown".
    const peek = await readJson(c);
    const pools = (peek as { pools?: unknown } | undefined)?.pools;
    if (Array.isArray(pools)) {
      for (const e of pools) {
        const owned = CONFIG_OWNED_POOL_FIELDS.find((f) => e && typeof e === "object" && f in e);
        if (owned) throw invalidBody(`field ${JSON.stringify(owned)} is config-owned`);
      }
    }
    const req = await decode(c, PutPoolsRequest, { prefixes: {} });
    const dup = duplicatePoolProblem(req.pools);
    if (dup) throw new SimError(400, dup);
    if (!node.egressAttachment && req.pools.some((p) => p.net === "egress")) throw conflict("egress pool without an egress attachment");
    node.pools.replace(req.pools);
    return json(c, 200, node.info());
  });

  app.post("/v1/drain", (c) => {
    node.tokens.rootOnly(bearer(c));
    node.drain();
    return json(c, 200, node.info());
  });

  app.delete("/v1/drain", (c) => {
    node.tokens.rootOnly(bearer(c));
    node.undrain();
    return json(c, 200, node.info());
  });

  app.get("/v1/peers", (c) => {
    node.tokens.nodeLevel(bearer(c));
    return json(c, 200, { peers: [...node.peerAddrs] });
  });

  app.get("/metrics", (c) => {
    node.tokens.rootOnly(bearer(c));
    return c.text(metricsText(node), 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
  });

  app.get("/healthz", (c) => c.text("ok", 200));
}
