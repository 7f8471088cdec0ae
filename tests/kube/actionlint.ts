// Builds and caches actionlint (the GitHub Actions workflow linter) from the Go module proxy, the way versitygw.ts
// builds its peer: once per machine under $SANDBOX_CACHE, behind peers.ts's lock and rename. The release workflow's
// test lints .github/workflows/ with it.
//
//   bun run tests/kube/actionlint.ts ensure     build it if missing, print cold/cached time
//   bun run tests/kube/actionlint.ts path
import { join } from "node:path";
import { cacheRoot, ensure, type EnsureResult } from "./peers.ts";

export const ACTIONLINT_VERSION = "v1.7.12";

export function actionlintPath(): string {
  return join(cacheRoot(), `actionlint-${ACTIONLINT_VERSION}`, "actionlint");
}

export function ensureActionlint(): Promise<EnsureResult> {
  return ensure(
    actionlintPath(),
    (tmp) => [
      [
        "go",
        "install",
        "-trimpath",
        "-ldflags",
        `-s -w -X github.com/rhysd/actionlint.version=${ACTIONLINT_VERSION}`,
        `github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION}`,
      ],
      undefined,
      { GOBIN: tmp },
    ],
    "actionlint",
  );
}

export async function actionlintBinary(): Promise<string> {
  return (await ensureActionlint()).path;
}

if (import.meta.main) {
  const [cmd] = process.argv.slice(2);
  if (cmd === "ensure") {
    const r = await ensureActionlint();
    console.error(`peers: actionlint ${ACTIONLINT_VERSION}: ${r.built ? "built cold" : "cached"} in ${r.seconds.toFixed(2)}s -> ${r.path}`);
  } else if (cmd === "path") {
    console.log(await actionlintBinary());
  } else {
    console.error("usage: bun run tests/kube/actionlint.ts ensure | path");
    process.exit(2);
  }
}
