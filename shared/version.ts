// Build identity, embedded by scripts/build.ts with `bun build --define`. Running from source (bun
// services/x/main.ts) leaves the identifiers undefined, and the version line says so: `dev`/`unknown`.
declare const __SANDBOX_VERSION__: string | undefined;
declare const __SANDBOX_REVISION__: string | undefined;
declare const __SANDBOX_BUILT_AT__: string | undefined;

export interface BuildInfo {
  version: string;
  revision: string;
  builtAt: string;
}

// `typeof` keeps an undefined identifier from throwing when no --define replaced it.
const pick = (value: string | undefined, fallback: string): string =>
  typeof value === "string" && value !== "" ? value : fallback;

export const buildInfo: BuildInfo = {
  version: pick(typeof __SANDBOX_VERSION__ === "undefined" ? undefined : __SANDBOX_VERSION__, "dev"),
  revision: pick(typeof __SANDBOX_REVISION__ === "undefined" ? undefined : __SANDBOX_REVISION__, "unknown"),
  builtAt: pick(typeof __SANDBOX_BUILT_AT__ === "undefined" ? undefined : __SANDBOX_BUILT_AT__, "unknown"),
};

/** `vk-sandbox 0.1.0 (rev=3f2a9c1 built=2026-11-29T08:00:00Z)`: the `--version` line of every binary. */
export function versionLine(name: string, info: BuildInfo = buildInfo): string {
  return `${name} ${info.version} (rev=${info.revision} built=${info.builtAt})`;
}
