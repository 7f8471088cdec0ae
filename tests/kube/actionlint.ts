// actionlint (the GitHub Actions workflow linter) from the Go module proxy, built once per machine under
// $SANDBOX_CACHE like the other peers: the release workflow's test lints .github/workflows/ with it.
//
//   bun run tests/kube/actionlint.ts ensure | path
import { goInstalledPeer } from "./peers.ts";

export const ACTIONLINT_VERSION = "v1.7.12";

const peer = goInstalledPeer({
  name: "actionlint",
  version: ACTIONLINT_VERSION,
  pkg: "github.com/rhysd/actionlint/cmd/actionlint",
  ldflags: `-s -w -X github.com/rhysd/actionlint.version=${ACTIONLINT_VERSION}`,
});

export const actionlintPath = peer.path;
export const ensureActionlint = peer.ensure;
export const actionlintBinary = peer.binary;

if (import.meta.main) await peer.main(process.argv.slice(2));
