// The snapshot and template routes of the e2b app (docs/e2b.md "Routes"): snapshot listing, template reads, tags
// and delete, and the build routes (a mounted build module's, else 501). Literal paths come before
// /templates/{templateID}.
import { createRoute, z } from "@hono/zod-openapi";
import { readJsonBody, readQuery } from "./body.ts";
import { BUILD_ROUTES, errors, json, jsonBody, noContent, notServed, type BuildMount, type BuildRoutes, type RouteKit } from "./route-kit.ts";
import * as S from "./schemas.ts";
import type { Snapshots } from "./snapshots.ts";
import type { TemplateCatalog } from "./templates.ts";

export interface TemplateRouteTargets {
  catalog: Pick<TemplateCatalog, "templates" | "templateAlias" | "assignTags" | "removeTags" | "templateTags" | "templateDetail">;
  snapshots: Pick<Snapshots, "listSnapshots" | "deleteTemplate">;
}

export function registerTemplateRoutes(mount: BuildMount, t: TemplateRouteTargets, builds: BuildRoutes | undefined): void {
  const { route, unserved }: RouteKit = mount;
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
  else for (const r of BUILD_ROUTES) unserved(r.method, r.path, notServed(r.what));
  route(createRoute({ method: "get", path: "/templates/{templateID}", request: { params: S.TemplateParam }, responses: { 200: json(S.TemplateWithBuilds, "A built template and its builds"), ...errors } }), (c, ns) =>
    c.json(t.catalog.templateDetail(ns, c.req.param("templateID") ?? "")),
  );
  route(createRoute({ method: "patch", path: "/templates/{templateID}", request: { params: S.TemplateParam, ...jsonBody(S.TemplateUpdate, false) }, responses: { 200: { description: "Accepted (every template here is public)" }, ...errors } }), async (c, ns) => {
    await readJsonBody(c.req.raw, S.TemplateUpdate, false);
    t.catalog.templateDetail(ns, c.req.param("templateID") ?? "");
    return c.body(null, 200);
  });
  route(createRoute({ method: "delete", path: "/templates/{templateID}", request: { params: S.TemplateParam }, responses: { ...noContent("Deleted"), ...errors } }), async (c, ns) => {
    await t.snapshots.deleteTemplate(ns, c.req.param("templateID") ?? "");
    return c.body(null, 204);
  });
  for (const path of ["/teams", "/secrets", "/volumes"]) {
    unserved("GET", path, notServed(path.slice(1)));
  }
}
