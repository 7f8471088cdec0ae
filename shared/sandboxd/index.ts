// Public surface of shared/sandboxd: the client, its typed errors and the wire schemas.
export * from "./client.ts";
export * from "./errors.ts";
export * from "./schemas.ts";
export { DEFAULT_TIMEOUT_MS, MAX_ERROR_BYTES, MAX_REPLY_BYTES, type RetryPolicy } from "./http.ts";
