// `stack.sh --mesh`: the lighter stack with no Kubernetes. Two simulated sandboxd nodes (a mesh, peers of each
// other) whose sandboxes carry guest agents, and sandbox-e2b learning them from seeds, with the envd proxy in the
// same process. The stock e2b SDK talks to the surface (E2B_API_URL) and the proxy (E2B_SANDBOX_URL).
import { join } from "node:path";
import { binary } from "./binary.ts";
import { isolationLine, startSimCluster } from "#services/sandboxd-sim/sim.ts";
import type { StackFiles } from "./files.ts";
import { BUILD_BASE_IMAGE, buildFlags, TEMPLATE_IMAGE } from "./files.ts";
import { answers, waitFor, type Supervisor } from "./supervisor.ts";

export const POOL = `${TEMPLATE_IMAGE}/none/small`;
export const WARM_PER_NODE = 2;
/** The e2b surface's sandbox domain (hosts {port}-{id}.{domain}); the SDK is pointed at E2B_SANDBOX_URL instead. */
export const E2B_DOMAIN = "e2b.localhost";

export interface StackContext {
  root: string;
  files: StackFiles;
  sup: Supervisor;
  ports: { e2b: number; proxy: number; node0: number; node1: number };
  say(line: string): void;
}

export interface StackExports {
  lines: string[];
  /** What to print after the export lines. */
  notes: string[];
}

export async function startSimulators(ctx: StackContext, mesh: boolean): Promise<string[]> {
  const { files, ports } = ctx;
  const cluster = await startSimCluster(2, {
    host: "127.0.0.1",
    ports: [ports.node0, ports.node1],
    rootToken: files.rootToken,
    pools: [`${POOL}=${WARM_PER_NODE}`],
    // Sandbox directories live in the run's work dir, so a stop leaves none behind.
    guestAgents: { dir: files.work },
  });
  ctx.sup.add("sandboxd simulators", () => cluster.stop());
  if (!mesh) for (const n of cluster.nodes) n.peers([]); // independent nodes, as under Kubernetes
  return cluster.nodes.map((n) => n.addr);
}

export async function startMesh(ctx: StackContext): Promise<StackExports> {
  const { files, ports, sup, say } = ctx;
  say(`sandboxd simulators (development substrate, no VMs) on 127.0.0.1:${ports.node0}, 127.0.0.1:${ports.node1}`);
  say(isolationLine());
  const seeds = await startSimulators(ctx, true);
  say(`sandbox-e2b (e2b API :${ports.e2b}, envd proxy in-process :${ports.proxy})`);
  sup.spawn("sandbox-e2b", [
    ...binary(ctx.root, "sandbox-e2b"),
    `--sandboxd-seeds=${seeds.join(",")}`,
    `--sandboxd-token-file=${files.rootTokenFile}`,
    "--inventory-poll=1s",
    `--e2b-bind-address=127.0.0.1:${ports.e2b}`,
    `--envd-proxy-bind-address=127.0.0.1:${ports.proxy}`,
    `--e2b-domain=${E2B_DOMAIN}`,
    `--e2b-envd-secret-file=${files.envdSecretFile}`,
    `--e2b-api-key-file=${files.apiKeyFile}`,
    `--e2b-template-alias-file=${files.aliasFile}`,
    ...buildFlags(files),
  ]);
  await waitFor("the e2b API", () => answers(`http://127.0.0.1:${ports.e2b}/health`, [200, 204]));
  await waitFor("the envd proxy", () => answers(`http://127.0.0.1:${ports.proxy}/healthz`, [200, 204]));
  return {
    lines: [
      `export E2B_API_KEY=${files.apiKey}`,
      `export E2B_API_URL=http://127.0.0.1:${ports.e2b}`,
      `export E2B_SANDBOX_URL=http://127.0.0.1:${ports.proxy}`,
    ],
    // A whole command with absolute paths: runs as printed from any directory, with no bun on PATH (scripts/bun).
    notes: [
      `try: ${join(ctx.root, "scripts", "bun")} ${join(ctx.root, "examples", "hello.ts")}`,
      `try: ${join(ctx.root, "scripts", "bun")} ${join(ctx.root, "examples", "build.ts")}`,
      `(template "base" = ${TEMPLATE_IMAGE}, ${WARM_PER_NODE} warm per node; builds on, from "${BUILD_BASE_IMAGE}" = ${TEMPLATE_IMAGE}, uploads in ${files.buildDir})`,
    ],
  };
}
