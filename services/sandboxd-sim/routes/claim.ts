// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// POST /v1/claim and POST /v1/checkpoints/{id}/claim (node-level auth). Lenient bodies; a bad template/net/size is
// `400 invalid pool key: …`, a bad metadata map `400 invalid metadata: …`.
import type { Hono } from "hono";
import { ClaimRequest, CheckpointClaimRequest, POOL_KEY_FIELDS } from "#shared/sandboxd/index.ts";
import { claim, checkpointClaim } from "../verbs.ts";
import type { SimNode } from "../node.ts";
import { bearer, decode, json, type SimEnv } from "./body.ts";

const prefixes: Record<string, string> = {
  ...Object.fromEntries(POOL_KEY_FIELDS.map((f) => [f, "invalid pool key"])),
  metadata: "invalid metadata",
  on_expire: "invalid on_expire",
  env: "invalid env",
};

export function registerClaim(app: Hono<SimEnv>, node: SimNode): void {
  app.post("/v1/claim", async (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    const req = await decode(c, ClaimRequest, { prefixes });
    return json(c, 200, claim(node, scope, req));
  });

  app.post("/v1/checkpoints/:id/claim", async (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    const req = await decode(c, CheckpointClaimRequest, { optional: true, prefixes });
    return json(c, 200, checkpointClaim(node, scope, c.req.param("id"), req));
  });
}
