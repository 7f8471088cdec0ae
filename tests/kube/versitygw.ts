// Builds and caches the S3-compatible test peer: versitygw (the Versity S3 Gateway) with its posix backend, from the
// Go module proxy, the way peers.ts builds kube-apiserver and helm: once per machine, under $SANDBOX_CACHE, behind
// the same directory lock and rename. The S3 upload store's tests (tests/integration/uploads-s3/) run against it;
// tests/support/s3/ starts one per test file.
//
//   bun run tests/kube/versitygw.ts ensure     build it if missing, print cold/cached time
//   bun run tests/kube/versitygw.ts path
import { goInstalledPeer } from "./peers.ts";

export const VERSITYGW_VERSION = "v1.8.0";

const peer = goInstalledPeer({
  name: "versitygw",
  version: VERSITYGW_VERSION,
  pkg: "github.com/versity/versitygw/cmd/versitygw",
  // The Makefile stamps these; without them `versitygw --version` says "git".
  ldflags: `-s -w -X main.Version=${VERSITYGW_VERSION} -X main.Build=module-proxy`,
});

export const versitygwPath = peer.path;
export const ensureVersitygw = peer.ensure;
/** Path of the versitygw binary, building it first if this version has never been built here. */
export const versitygwBinary = peer.binary;

if (import.meta.main) await peer.main(process.argv.slice(2));
