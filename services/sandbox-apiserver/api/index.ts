// services/sandbox-apiserver/api — the folder's front door: what other folders may import from it.
export { type ApiApp, type ApiBindings, apiRoutes } from "./routes.ts";
export { ApiError, badRequest, forbidden, internal, notFound, statusResponse } from "./status.ts";
export { MAX_REQUEST_BODY_BYTES } from "./validate.ts";
