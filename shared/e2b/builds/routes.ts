// The build API's routes (docs/e2b.md §6.1, §6.3), mounted into the e2b app by its build hook: four behind the key
// check, and the directory store's signed PUT, which carries no key and checks its own signature first.
import { createRoute, z, type RouteConfig } from "@hono/zod-openapi";
import type { Context } from "hono";
import { readJsonBody, readQuery } from "../body.ts";
import { errorResponse } from "../errors.ts";
import * as S from "../schemas.ts";
import { DirUploadStore, FILES_HASH_RE } from "../uploads/index.ts";
import { checkTemplateName, type BuildService } from "./service.ts";
import { RequestBuildBody, StartBuildBody, StatusQuery } from "./steps.ts";

type Env = { Variables: { namespace: string } };

/** The part of the e2b app's build mount these routes use (shared/e2b/route-kit.ts BuildMount). */
export interface BuildRouteMount {
  route(cfg: RouteConfig, handler: (c: Context<Env>, ns: string) => Promise<Response> | Response): void;
  signedRoute(cfg: RouteConfig, handler: (c: Context<Env>) => Promise<Response> | Response): void;
}

const json = (schema: z.ZodType, description: string) => ({ content: { "application/json": { schema } }, description });
const errors = {
  400: json(S.ErrorSchema, "Invalid request"),
  401: json(S.ErrorSchema, "Missing or invalid X-API-KEY"),
  404: json(S.ErrorSchema, "Not found (also: exists in another namespace, or on another replica)"),
  500: json(S.ErrorSchema, "Server or node failure"),
};
const jsonBody = (schema: z.ZodType) => ({ body: { content: { "application/json": { schema } }, required: true } });
const TemplateBuildParams = z.object({ templateID: z.string(), buildID: z.string() });
const FilesParams = z.object({ templateID: z.string(), hash: z.string() });
const LogEntrySchema = z.object({ timestamp: z.string(), message: z.string(), level: z.enum(["debug", "info", "warn", "error"]), step: z.string() });
const BuildInfo = z
  .object({
    templateID: z.string(),
    buildID: z.string(),
    status: z.enum(["waiting", "building", "ready", "error"]),
    logs: z.array(z.string()),
    logEntries: z.array(LogEntrySchema),
    reason: z.object({ message: z.string(), step: z.string(), logEntries: z.array(LogEntrySchema) }).optional(),
  })
  .openapi("TemplateBuildInfo");
const RequestBuildReply = z
  .object({ templateID: z.string(), buildID: z.string(), public: z.boolean(), names: z.array(z.string()), tags: z.array(z.string()), aliases: z.array(z.string()) })
  .openapi("TemplateRequestResponseV3");
const UploadLink = z.object({ present: z.boolean(), url: z.string().optional(), headers: z.record(z.string(), z.string()).optional() }).openapi("TemplateBuildFileUpload");
const PutQuery = z.object({ ns: z.string().max(256), expires: z.string().max(16), sig: z.string().max(128) });
/** A namespace is a Kubernetes namespace name: a DNS-1123 label. */
const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** `<http|https>://<Host>` of the request: https over TLS or behind a proxy saying `X-Forwarded-Proto: https`. */
export function originOf(req: Request): string {
  const url = new URL(req.url);
  const https = url.protocol === "https:" || (req.headers.get("x-forwarded-proto") ?? "").split(",")[0]!.trim().toLowerCase() === "https";
  return `${https ? "https" : "http"}://${req.headers.get("host") ?? url.host}`;
}

export function registerBuildRoutes(mount: BuildRouteMount, builds: BuildService): void {
  const { route } = mount;
  const param = (c: Context<Env>, k: string) => c.req.param(k) ?? "";

  route(
    createRoute({ method: "post", path: "/v3/templates", request: jsonBody(RequestBuildBody), responses: { 202: json(RequestBuildReply, "Build registered (waiting)"), ...errors } }),
    async (c, ns) => c.json(builds.requestBuild(ns, await readJsonBody(c.req.raw, RequestBuildBody, true)), 202),
  );
  route(
    createRoute({
      method: "post",
      path: "/v2/templates/{templateID}/builds/{buildID}",
      request: { params: TemplateBuildParams, ...jsonBody(StartBuildBody) },
      responses: { 202: { description: "Started (or already started)" }, 429: json(S.ErrorSchema, "Every build slot is busy; the build stays waiting"), ...errors },
    }),
    async (c, ns) => {
      builds.startBuild(ns, param(c, "templateID"), param(c, "buildID"), await readJsonBody(c.req.raw, StartBuildBody, true));
      return c.body(null, 202);
    },
  );
  route(
    createRoute({
      method: "get",
      path: "/templates/{templateID}/builds/{buildID}/status",
      request: { params: TemplateBuildParams, query: StatusQuery },
      responses: { 200: json(BuildInfo, "Status and a page of the log"), ...errors },
    }),
    (c, ns) => c.json(builds.status(ns, param(c, "templateID"), param(c, "buildID"), readQuery(c.req.raw, StatusQuery))),
  );
  if (!builds.store) return;
  route(
    createRoute({ method: "get", path: "/templates/{templateID}/files/{hash}", request: { params: FilesParams }, responses: { 201: json(UploadLink, "Present, or where to upload"), ...errors } }),
    async (c, ns) => c.json(await builds.files(ns, param(c, "templateID"), param(c, "hash"), originOf(c.req.raw)), 201),
  );
  const store = builds.store;
  if (!(store instanceof DirUploadStore)) return;
  mount.signedRoute(
    createRoute({
      method: "put",
      path: "/templates/{templateID}/files/{hash}",
      request: { params: FilesParams, query: PutQuery },
      responses: { 200: { description: "Stored" }, 400: errors[400], 401: json(S.ErrorSchema, "Expired or invalid signature"), 413: json(S.ErrorSchema, "Larger than --e2b-build-upload-max"), 429: json(S.ErrorSchema, "The namespace's upload quota or the uploads in progress are at their bound") },
    }),
    async (c) => {
      const template = param(c, "templateID");
      const hash = param(c, "hash");
      const q = readQuery(c.req.raw, PutQuery);
      // The signature first: nothing about the request is acted on before it holds.
      const refused = store.verify(q.ns, template, hash, q.expires, q.sig);
      if (refused) return errorResponse(401, refused);
      if (!DNS_1123_LABEL.test(q.ns)) return errorResponse(400, "ns must be a DNS-1123 label");
      checkTemplateName(template, q.ns);
      if (!FILES_HASH_RE.test(hash)) return errorResponse(400, "hash must be 64 lowercase hex characters");
      const lengthText = c.req.header("content-length");
      const declared = lengthText !== undefined && /^\d{1,15}$/.test(lengthText) ? Number(lengthText) : undefined;
      const out = await store.write(q.ns, template, hash, declared, c.req.raw.body);
      if (out.status !== 200) return errorResponse(out.status, out.message);
      return c.body(null, 200);
    },
  );
}
