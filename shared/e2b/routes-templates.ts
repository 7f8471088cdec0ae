// The snapshot and template routes of the e2b app (docs/e2b.md "Routes"): snapshot listing, template reads, tags
// and delete, the visibility PATCH (v1 and the CLI's v2), and a mounted build module's routes (without one, app.ts
// answers the build routes 501 from unserved.ts). Literal paths come before /templates/{templateID}.
import { createRoute, z } from "@hono/zod-openapi";
import { readJsonBody, readQuery } from "./body.ts";
import type { Context } from "hono";
import { errors, json, jsonBody, noContent, type BuildMount, type E2bEnv, type BuildRoutes, type RouteKit } from "./route-kit.ts";
import * as S from "./schemas.ts";
import type { Snapshots } from "./snapshots.ts";
import type { TemplateCatalog } from "./templates.ts";

export interface TemplateRouteTargets {
  catalog: Pick<TemplateCatalog, "templates" | "templateAlias" | "assignTags" | "removeTags" | "templateTags" | "templateDetail">;
  snapshots: Pick<Snapshots, "listSnapshots" | "deleteTemplate">;
}

export function registerTemplateRoutes(mount: BuildMount, t: TemplateRouteTargets, builds: BuildRoutes | undefined): void {
  const { route }: RouteKit = mount;
  route(
    createRoute({ method: "get", path: "/snapshots", request: { query: S.SnapshotsQuery }, responses: { 200: { ...json(z.array(S.SnapshotInfo), "One page"), headers: z.object({ "X-Next-Token": z.string().optional() }) }, ...errors } }),
    async (c, ns) => {
      const { items, nextToken } = await t.snapshots.listSnapshots(ns, readQuery(c.req.raw, S.SnapshotsQuery));
      if (nextToken) c.header("X-Next-Token", nextToken);
      return c.json(items);
    },
  );

  for (const path of ["/templates", "/v2/templates"]) {
    route(createRoute({ method: "get", path, responses: { 200: json(z.array(S.TemplateSchema), "Pool images and built templates"), ...errors } }), (c, ns) => c.json(t.catalog.templates(ns)));
  }
  route(createRoute({ method: "get", path: "/templates/aliases/{alias}", request: { params: S.AliasParam }, responses: { 200: json(S.TemplateAliasResponse, "Known"), ...errors } }), (c, ns) =>
    c.json(t.catalog.templateAlias(ns, c.req.param("alias") ?? "")),
  );
  route(createRoute({ method: "post", path: "/templates/tags", request: jsonBody(S.AssignTagsBody, true), responses: { 201: json(S.AssignTagsReply, "Tags point at the build"), ...errors } }), async (c, ns) => {
    const b = await readJsonBody(c.req.raw, S.AssignTagsBody, true);
    return c.json(await t.catalog.assignTags(ns, b.target, b.tags), 201);
  });
  route(createRoute({ method: "delete", path: "/templates/tags", request: jsonBody(S.RemoveTagsBody, true), responses: { ...noContent("Tags removed"), ...errors } }), async (c, ns) => {
    const b = await readJsonBody(c.req.raw, S.RemoveTagsBody, true);
    await t.catalog.removeTags(ns, b.name, b.tags);
    return c.body(null, 204);
  });
  route(createRoute({ method: "get", path: "/templates/{templateID}/tags", request: { params: S.TemplateParam }, responses: { 200: json(z.array(S.TemplateTag), "Live tags"), ...errors } }), async (c, ns) =>
    c.json(await t.catalog.templateTags(ns, c.req.param("templateID") ?? "")),
  );
  if (builds) builds(mount);
  route(createRoute({ method: "get", path: "/templates/{templateID}", request: { params: S.TemplateParam }, responses: { 200: json(S.TemplateWithBuilds, "A built template and its builds"), ...errors } }), (c, ns) =>
    c.json(t.catalog.templateDetail(ns, c.req.param("templateID") ?? "")),
  );
  // `public` is accepted and changes nothing (docs/e2b-routes.md "Template visibility"): a built template is seen by its own
  // namespace only, whatever the flag; a pool image by every namespace. v1 answers an empty 200, v2 (the CLI's
  // `e2b template publish/unpublish`) the template's names as e2b does.
  const visibility = async (c: Context<E2bEnv>, ns: string) => {
    await readJsonBody(c.req.raw, S.TemplateUpdate, false);
    return t.catalog.templateDetail(ns, c.req.param("templateID") ?? "");
  };
  route(createRoute({ method: "patch", path: "/templates/{templateID}", request: { params: S.TemplateParam, ...jsonBody(S.TemplateUpdate, false) }, responses: { 200: { description: "Accepted; visibility unchanged" }, ...errors } }), async (c, ns) => {
    await visibility(c, ns);
    return c.body(null, 200);
  });
  route(
    createRoute({ method: "patch", path: "/v2/templates/{templateID}", request: { params: S.TemplateParam, ...jsonBody(S.TemplateUpdate, false) }, responses: { 200: json(S.TemplateUpdateReply, "Accepted; visibility unchanged"), ...errors } }),
    async (c, ns) => c.json({ names: (await visibility(c, ns)).names }),
  );
  route(createRoute({ method: "delete", path: "/templates/{templateID}", request: { params: S.TemplateParam }, responses: { ...noContent("Deleted"), ...errors } }), async (c, ns) => {
    await t.snapshots.deleteTemplate(ns, c.req.param("templateID") ?? "");
    return c.body(null, 204);
  });
}
