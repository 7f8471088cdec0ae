// sandboxd id, token and name formats (sandboxd §1; docs/spec-sections.md). Re-exported by schemas.ts.

/** `sb_` + 16 lowercase hex. The e2b layer shows it as `sb-…`; sandboxd knows only the underscore form. */
export const SANDBOX_ID_RE = /^sb_[0-9a-f]{16}$/;
/** A sandbox's own bearer: 32 lowercase hex. */
export const SANDBOX_TOKEN_RE = /^[0-9a-f]{32}$/;
/** Checkpoint ids: `ck_` + lowercase hex (the simulator mints 16). */
export const CHECKPOINT_ID_RE = /^ck_[0-9a-f]+$/;
/** Checkpoint / tenant names and stamped (promoted) template refs. */
export const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9._:/-]{0,62}$/;
/** `sha256:` + 64 hex, as promote and `/v1/info` templates report it. */
export const CONTENT_DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
