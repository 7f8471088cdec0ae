// services/sandbox-apiserver/api — the folder's front door: what other folders may import from it.
export { apiRoutes } from "./routes.ts";
export { ApiError, badRequest, internal, notFound, statusResponse } from "./status.ts";
export { MAX_REQUEST_BODY_BYTES } from "./validate.ts";
