// shared/sandboxd — the sandboxd wire contract (schemas.ts, with ids.ts, wire-time.ts, metadata.ts), the one typed
// client (client.ts, the public face over claim.ts, verbs.ts, reads.ts, urls.ts and the call plumbing in call.ts),
// its errors (errors.ts) and transport (http.ts). Contract: sandboxd §1–§6, client rules: §8 (indexed in docs/spec-sections.md).
//
// What a caller decides from a failed claim (one SandboxdClient per node):
//
//   error                                   provablyUndelivered  isCapacity  meaning / what to do
//   SandboxdCapacity (429, 200 without id)  yes                  yes         try another node or back off
//   SandboxdRedirect (not followed/exhausted) yes                yes         targets tried or handed back
//   SandboxdTransport delivered:"no"        yes                  no          node unreachable; try elsewhere
//   SandboxdServerError provisioning failed yes                  no          nothing handed out; may retry
//   SandboxdAmbiguousClaim                  no                   no          maybe handed out; reconcile found 0 or
//                                                                            ≥2 unknown rows: do NOT claim blindly
//   anything else (400/401/403/404/409)     no                   no          the request or credential is wrong
//
// A lost claim reply (reset or timeout after sending, unusable 200, other 5xx) is reconciled inside claim():
// exactly one unknown row under the claim_ref is adopted and returned with `adopted: true`.
export * from "./client.ts";
export * from "./errors.ts";
export * from "./schemas.ts";
export { DEFAULT_TIMEOUT_MS, MAX_ERROR_BYTES, MAX_REPLY_BYTES, type RetryPolicy } from "./http.ts";
