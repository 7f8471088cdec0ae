// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// POST /v1/sandboxes/{id}/preview (sandboxd.md §5.6, §2.2). Checks, in order: node-level header guard (401) ->
// 501 when the node has no preview listener -> body decode (lenient, 400) -> port 1-65535 (400) -> the body
// token, which is always required (no operator path: an empty one is the same 404 as a wrong one or an unknown id).
import type { Hono } from "hono";
import { bodyTokenAccess } from "../auth.ts";
import { SimError } from "../errors.ts";
import { mintPreviewUrl, previewExpiry } from "../preview.ts";
import type { SimNode } from "../node.ts";
import { PreviewRequest, type PreviewReply } from "#shared/sandboxd/index.ts";
import { bearer, decode, json, type SimEnv } from "./body.ts";

export function registerPreview(app: Hono<SimEnv>, node: SimNode): void {
  app.post("/v1/sandboxes/:id/preview", async (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    if (node.previewAdvertise === null) throw new SimError(501, "preview listener not configured");
    const req = await decode(c, PreviewRequest);
    if (req.port < 1 || req.port > 65535) throw new SimError(400, "port must be 1-65535");
    const { sandbox } = bodyTokenAccess(scope, req.token, node.table.get(c.req.param("id")), { operatorPath: false });
    const grant = { sandboxId: sandbox.id, port: req.port, owner: node.addr, expiresAt: previewExpiry(node.clock.now(), sandbox, req.ttl_seconds) };
    const reply: PreviewReply = { url: mintPreviewUrl(node.previewSecret, node.previewAdvertise, grant) };
    return json(c, 200, reply);
  });
}
