// What a route file of the e2b app gets from app.ts (docs/e2b.md "Layout"): `route` registers a route twice from
// one config (in the OpenAPI registry, so /openapi.json documents it with the zod schemas of schemas.ts, and on the
// router, whose handler validates with the very same schemas, body.ts) behind app.ts's key check. Routes this server
// does not serve are not registered here: app.ts answers them from unserved.ts. Route files never authenticate.
import { z, type RouteConfig } from "@hono/zod-openapi";
import type { Context } from "hono";
import * as S from "./schemas.ts";

export type E2bEnv = { Variables: { namespace: string } };
/** A handler of an authenticated route: `ns` is the namespace of the caller's key. */
export type E2bHandler = (c: Context<E2bEnv>, ns: string) => Promise<Response> | Response;

export interface RouteKit {
  /** Register a served route behind the key check (documented in /openapi.json). */
  route(cfg: RouteConfig, handler: E2bHandler): void;
}

export const json = (schema: z.ZodType, description: string) => ({ content: { "application/json": { schema } }, description });
export const errors = {
  400: json(S.ErrorSchema, "Invalid request"),
  401: json(S.ErrorSchema, "Missing or invalid X-API-KEY"),
  404: json(S.ErrorSchema, "Not found (also: exists in another namespace)"),
  500: json(S.ErrorSchema, "Server or node failure"),
};
export const quotaErrors = { 429: { ...json(S.ErrorSchema, "Namespace quota exceeded (max-sandboxes, creates-per-second, max-snapshots or snapshots-per-second)"), headers: z.object({ "Retry-After": z.string() }) } };
export const noContent = (description: string) => ({ 204: { description } });
export const jsonBody = (schema: z.ZodType, required: boolean) => ({ body: { content: { "application/json": { schema } }, required } });
export const idParams = { params: S.IdParam };

/** The `{sandboxID}` path parameter. */
export const sandboxIdOf = (c: Context<E2bEnv>) => c.req.param("sandboxID") ?? "";

/** `{param}` (OpenAPI) -> `:param` (hono). */
export const honoPath = (path: string) => path.replace(/\{(\w+)\}/g, ":$1");

/** A handler of a route that carries no key: it authenticates the request itself (a signed URL). */
export type SignedHandler = (c: Context<E2bEnv>) => Promise<Response> | Response;

/**
 * What a template-build module (shared/e2b/builds/, served behind --e2b-builds) registers its routes with:
 * `POST /v3/templates`, `POST /v2/templates/{templateID}/builds/{buildID}`,
 * `GET /templates/{templateID}/builds/{buildID}/status` and `GET /templates/{templateID}/files/{hash}` through
 * `route` (behind the key check), the signed `PUT /templates/{templateID}/files/{hash}` through `signedRoute`.
 */
export interface BuildMount extends RouteKit {
  /**
   * A route that carries no X-API-KEY (docs/e2b.md "Builds": the signed upload PUT). app.ts lets exactly this method
   * and path pattern past its key check; the handler MUST verify the request's signature before doing anything.
   */
  signedRoute(cfg: RouteConfig, handler: SignedHandler): void;
}

/** The optional builds hook: given, its routes replace the 501 answers of the build routes (unserved.ts). */
export type BuildRoutes = (mount: BuildMount) => void;
