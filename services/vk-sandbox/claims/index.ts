// The claims table: row types and file schema (schema.ts), encoding (codec.ts), the durable file (file.ts)
// and the group commit that lets concurrent claims share one write (group-commit.ts).
export type { Claim, OwnerRef, TableSnapshot, ClaimsFile as ClaimsFileJson } from "./schema.ts";
export { ClaimsFileSchema, ClaimFileSchema, OwnerRefFileSchema } from "./schema.ts";
export { encodeTable, encodeRow, decodeTable, type DecodedTable } from "./codec.ts";
export { ClaimsFile, type ClaimsFileOptions } from "./file.ts";
export { GroupCommit, type BatchWriter } from "./group-commit.ts";
export { ClaimsStateError, isClaimsStateError, type ClaimsStateProblem } from "./errors.ts";
