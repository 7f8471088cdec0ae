// The claims table. Others enter through ClaimsStore (store.ts: load once, then commit), built on a ClaimsFile (the
// durable file; wire.ts makes one, the metrics time its writes). Behind them: row types and the file schema
// (schema.ts), the encoding (codec.ts) and the group commit that lets concurrent claims share one write.
export type { Claim, OwnerRef, TableSnapshot, ClaimsFile as ClaimsFileJson } from "./schema.ts";
export { ClaimsFileSchema, ClaimFileSchema, OwnerRefFileSchema } from "./schema.ts";
export type { DecodedTable } from "./codec.ts";
export { ClaimsFile, type ClaimsFileOptions, bodyBytes } from "./file.ts";
export { ClaimsStore, type TableSource } from "./store.ts";
export { ClaimsStateError, isClaimsStateError, type ClaimsStateProblem } from "./errors.ts";
