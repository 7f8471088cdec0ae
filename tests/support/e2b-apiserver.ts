// sandbox-apiserver with its e2b surface (--enable-e2b-api) over one simulated node, on the kube test peers
// (tests/integration/sandbox-apiserver/fixture.ts): the files its e2b flags read, the NodeInventory the test
// publishes for the sim's node (the harness plays vk-sandbox), and the flags every such test starts it with.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { type Stack, rfc3339 } from "#tests/integration/sandbox-apiserver/fixture.ts";

/** In `dir`: `keys` (the key lines as given), `secret` (the envd secret) and `aliases` (base -> img:1). */
export function writeE2bFiles(dir: string, keys: string): void {
  writeFileSync(join(dir, "keys"), keys);
  writeFileSync(join(dir, "secret"), "envd-secret\n");
  writeFileSync(join(dir, "aliases"), "base img:1\n");
}

/** The sim's node "n1" as vk-sandbox would publish it, published now: its pools as the sim reports them, `entries` as given. */
export function publishSimNode(stack: Stack, sim: SandboxdSim, entries: Record<string, unknown>[] = []): Promise<void> {
  return stack.publish({
    node: "n1",
    address: sim.addr,
    publishedAt: rfc3339(Date.now()),
    pools: sim.info().pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target })),
    entries,
  });
}

/**
 * The args of a sandbox-apiserver serving e2b on 127.0.0.1:`port` for `domain` (default sb.test), reaching the
 * nodes with `rootToken` (`port` as freePorts gives it), the warm-pool driver off, the files of writeE2bFiles in
 * `dir`; more flags after them.
 */
export function e2bServerArgs(o: { rootToken: string; port: number | undefined; dir: string; domain?: string }, ...more: string[]): string[] {
  return [
    `--sandboxd-token=${o.rootToken}`,
    "--enable-warm-pool-driver=false",
    "--enable-e2b-api",
    `--e2b-bind-address=127.0.0.1:${o.port}`,
    `--e2b-domain=${o.domain ?? "sb.test"}`,
    `--e2b-api-key-file=${join(o.dir, "keys")}`,
    `--e2b-envd-secret-file=${join(o.dir, "secret")}`,
    `--e2b-template-alias-file=${join(o.dir, "aliases")}`,
    ...more,
  ];
}
