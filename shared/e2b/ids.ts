// Sandbox id forms (docs/e2b.md "Ids") live in shared/envd-token, next to the token derivation bound to them (the
// relay needs both and must not import this folder); re-exported for this folder's callers.
export { claimIdOf, publicSandboxId, sameSandboxId } from "../envd-token/index.ts";
