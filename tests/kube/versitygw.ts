// Builds and caches the S3-compatible test peer: versitygw (the Versity S3 Gateway) with its posix backend, from the
// Go module proxy, the way peers.ts builds kube-apiserver and helm: once per machine, under $SANDBOX_CACHE, behind
// the same directory lock and rename. The S3 upload store's tests (tests/integration/uploads-s3/) run against it;
// tests/support/s3/ starts one per test file.
//
//   bun run tests/kube/versitygw.ts ensure     build it if missing, print cold/cached time
//   bun run tests/kube/versitygw.ts path
import { join } from "node:path";
import { cacheRoot, ensure, type EnsureResult } from "./peers.ts";

export const VERSITYGW_VERSION = "v1.8.0";
const MODULE = "github.com/versity/versitygw";

export function versitygwPath(): string {
  return join(cacheRoot(), `versitygw-${VERSITYGW_VERSION}`, "versitygw");
}

export function ensureVersitygw(): Promise<EnsureResult> {
  return ensure(
    versitygwPath(),
    (tmp) => [
      [
        "go",
        "install",
        "-trimpath",
        // The Makefile stamps these; without them `versitygw --version` says "git".
        "-ldflags",
        `-s -w -X main.Version=${VERSITYGW_VERSION} -X main.Build=module-proxy`,
        `${MODULE}/cmd/versitygw@${VERSITYGW_VERSION}`,
      ],
      undefined,
      { GOBIN: tmp },
    ],
    "versitygw",
  );
}

/** Path of the versitygw binary, building it first if this version has never been built here. */
export async function versitygwBinary(): Promise<string> {
  return (await ensureVersitygw()).path;
}

if (import.meta.main) {
  const [cmd] = process.argv.slice(2);
  if (cmd === "ensure") {
    const r = await ensureVersitygw();
    console.error(`peers: versitygw ${VERSITYGW_VERSION}: ${r.built ? "built cold" : "cached"} in ${r.seconds.toFixed(2)}s -> ${r.path}`);
  } else if (cmd === "path") {
    console.log(await versitygwBinary());
  } else {
    console.error("usage: bun run tests/kube/versitygw.ts ensure | path");
    process.exit(2);
  }
}
