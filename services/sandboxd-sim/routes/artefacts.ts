// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Checkpoints (list, delete) and promoted templates (delete, labels). Node-level auth; a tenant sees and deletes
// only its own (another tenant's is the same 404 as an unknown one).
import type { Hono } from "hono";
import { SimError, conflict } from "../errors.ts";
import { checkpointOut } from "../verbs.ts";
import { templateOwners } from "../mesh.ts";
import type { Scope } from "../auth.ts";
import type { SimNode, TemplateRec } from "../node.ts";
import { DEFAULT_NET, DEFAULT_SIZE, Net, Size, TemplateLabelsRequest, poolKeyString, type PoolKey } from "#shared/sandboxd/index.ts";
import { bearer, decode, json, type SimContext, type SimEnv } from "./body.ts";

function keyFromQuery(c: SimContext): PoolKey {
  const template = c.req.query("template") ?? "";
  if (template === "") throw new SimError(400, "invalid pool key: template is required");
  const net = Net.safeParse(c.req.query("net") || DEFAULT_NET);
  const size = Size.safeParse(c.req.query("size") || DEFAULT_SIZE);
  if (!net.success) throw new SimError(400, `invalid pool key: unknown net ${JSON.stringify(c.req.query("net"))}`);
  if (!size.success) throw new SimError(400, `invalid pool key: unknown size ${JSON.stringify(c.req.query("size"))}`);
  return { template, net: net.data, size: size.data };
}

function visible(scope: Scope, owner: string | undefined): boolean {
  return scope.kind === "root" || owner === scope.tenant;
}

/** Find a promoted template this caller may act on; configured pools are 409, digest mismatch 412. */
function ownTemplate(node: SimNode, scope: Scope, c: SimContext, key: PoolKey): TemplateRec | undefined {
  const t = node.templateFor(key);
  if (!t || !visible(scope, t.tenant)) {
    if (node.pools.configured(key)) throw conflict("template is a configured pool");
    return undefined;
  }
  const digest = c.req.query("digest");
  if (digest && digest !== t.contentDigest) throw new SimError(412, "template digest mismatch");
  return t;
}

export function registerArtefacts(app: Hono<SimEnv>, node: SimNode): void {
  app.get("/v1/checkpoints", (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    const list = [...node.checkpoints.values()]
      .filter((ck) => visible(scope, ck.tenant))
      .sort((a, b) => b.createdAt - a.createdAt || b.id.localeCompare(a.id))
      .map(checkpointOut);
    return json(c, 200, { checkpoints: list });
  });

  app.delete("/v1/checkpoints/:id", (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    const ck = node.checkpoints.get(c.req.param("id"));
    if (!ck || !visible(scope, ck.tenant)) throw new SimError(404, "unknown checkpoint");
    node.checkpoints.delete(ck.id);
    return c.body(null, 204);
  });

  app.delete("/v1/templates", (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    const key = keyFromQuery(c);
    const t = ownTemplate(node, scope, c, key);
    if (!t) {
      const noRedirect = ["1", "true"].includes(c.req.query("no_redirect") ?? "");
      const owners = noRedirect ? [] : templateOwners(node, key);
      if (owners.length) return json(c, 200, { redirect: owners });
      throw new SimError(404, "unknown template");
    }
    node.templates.delete(poolKeyString(key));
    return c.body(null, 204);
  });

  app.put("/v1/templates/labels", async (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    const key = keyFromQuery(c);
    const req = await decode(c, TemplateLabelsRequest, { prefixes: { labels: "invalid labels" } });
    const t = ownTemplate(node, scope, c, key);
    if (!t) throw new SimError(404, "unknown template");
    t.labels = { ...req.labels };
    return c.body(null, 204);
  });
}
