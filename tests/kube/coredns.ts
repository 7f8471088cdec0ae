// Builds and caches CoreDNS (test peer only) for the single-node cluster's DNS (tests/kube/node/): the wrapper module
// in ./coredns compiles CoreDNS v1.14.7 from the Go module proxy with only the plugins that DNS uses (bind, errors,
// log, cache, template, kubernetes), instead of every plugin of the stock binary (cloud providers, tracing, …),
// which took a quarter of an hour on 2 busy cores. The cache key hashes the wrapper's go.mod, go.sum and main.go,
// as peers.ts does for kube-apiserver.
//
//   bun run tests/kube/coredns.ts ensure | path
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cacheRoot, ensure, type EnsureResult } from "./peers.ts";

export const COREDNS_VERSION = "v1.14.7";
const wrapperDir = join(import.meta.dir, "coredns");

function key(): string {
  const h = createHash("sha256");
  for (const f of ["go.mod", "go.sum", "main.go"]) h.update(f).update("\0").update(readFileSync(join(wrapperDir, f))).update("\0");
  return `${COREDNS_VERSION}-${h.digest("hex").slice(0, 12)}`;
}

export function corednsPath(): string {
  return join(cacheRoot(), `coredns-${key()}`, "coredns");
}

export function ensureCoredns(): Promise<EnsureResult> {
  return ensure(corednsPath(), (tmp) => [
    ["go", "build", "-trimpath", "-ldflags", `-s -w -X github.com/coredns/coredns/coremain.GitCommit=${COREDNS_VERSION}`, "-o", tmp, "."],
    wrapperDir,
  ]);
}

export async function corednsBinary(): Promise<string> {
  return (await ensureCoredns()).path;
}

if (import.meta.main) {
  const [cmd] = process.argv.slice(2);
  if (cmd === "ensure") {
    const r = await ensureCoredns();
    console.error(`peers: coredns ${key()}: ${r.built ? "built cold" : "cached"} in ${r.seconds.toFixed(2)}s -> ${r.path}`);
  } else if (cmd === "path") {
    console.log(await corednsBinary());
  } else {
    console.error("usage: bun run tests/kube/coredns.ts ensure | path");
    process.exit(2);
  }
}
