// A sandbox-e2b stack for tests: simulated sandboxd nodes (development substrate) on a real clock, one shared test
// guest behind every node's ports relay, and sandbox-e2b started in-process from its real flags.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSimCluster, type SimCluster } from "#services/sandboxd-sim/sim.ts";
import { parseE2bMeshFlags } from "#services/sandbox-e2b/flags.ts";
import { startE2bMesh, type E2bMesh } from "#services/sandbox-e2b/wire.ts";
import { createLogger } from "#shared/log/index.ts";
import { waitFor } from "#tests/support/wait.ts";
import { startTestGuest, type TestGuest } from "./guest.ts";

export const ROOT = "root-token-e2b-tests";
export const SECRET = "envd-secret-for-tests";
export const DOMAIN = "sandbox.test";
export const KEY_A = "e2b_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
export const KEY_B = "e2b_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

const DEFAULT_POOLS = ["img:1/none/small=3", "img:1/egress/small=1"];

export interface StackOptions {
  nodes?: number;
  pools?: string[];
  /** Key file text; default: KEY_A in namespace team-a, KEY_B in team-b. */
  keys?: string | null;
  aliases?: string;
  anonymous?: boolean;
  extraFlags?: string[];
  proxy?: boolean;
  /** Give every claim its own envd-compatible guest agent (the simulator's) instead of the shared test guest. */
  guestAgents?: boolean;
}

export interface Stack {
  apiUrl: string;
  proxyUrl: string | undefined;
  cluster: SimCluster;
  guest: TestGuest;
  mesh: E2bMesh;
  dir: string;
  stop(): Promise<void>;
}

export async function startStack(o: StackOptions = {}): Promise<Stack> {
  // What is up so far, stopped in reverse if a later step fails: a setup that fails (or a file whose beforeAll
  // timed out) must leave no node, guest or listener behind for the next file to meet.
  const started: (() => Promise<void> | void)[] = [];
  const stopAll = async () => {
    for (const stop of started.splice(0).reverse()) await stop();
  };
  try {
    const cluster = await startSimCluster(o.nodes ?? 1, { rootToken: ROOT, pools: o.pools ?? DEFAULT_POOLS, ...(o.guestAgents ? { guestAgents: true } : {}) });
    started.push(() => cluster.stop());
    const guest = await startTestGuest();
    started.push(() => guest.stop());
    // Per-sandbox guest agents take port 49983 before a `*` attachment; without them the shared test guest serves.
    for (const n of cluster.nodes) n.attachGuest("*", 49983, guest.port);
    const dir = mkdtempSync(join(tmpdir(), "e2b-test-"));
    started.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, "secret"), `${SECRET}\n`);
    writeFileSync(join(dir, "aliases"), o.aliases ?? "base img:1\n");
    const argv = [
      `--sandboxd-seeds=${cluster.nodes.map((n) => n.addr).join(",")}`,
      `--sandboxd-token=${ROOT}`,
      "--inventory-poll=200ms",
      "--e2b-bind-address=127.0.0.1:0",
      `--e2b-domain=${DOMAIN}`,
      `--e2b-envd-secret-file=${join(dir, "secret")}`,
      `--e2b-template-alias-file=${join(dir, "aliases")}`,
    ];
    if (o.keys !== null) {
      writeFileSync(join(dir, "keys"), o.keys ?? `${KEY_A} team-a\n${KEY_B} team-b\n`);
      argv.push(`--e2b-api-key-file=${join(dir, "keys")}`);
    }
    if (o.anonymous) argv.push("--e2b-allow-anonymous");
    if (o.proxy) argv.push("--envd-proxy-bind-address=127.0.0.1:0");
    argv.push(...(o.extraFlags ?? []));
    const parsed = parseE2bMeshFlags(argv, {});
    if (parsed.kind !== "run") throw new Error("unexpected flag outcome");
    const mesh = await startE2bMesh(parsed.config, createLogger({ level: (process.env.TEST_LOG_LEVEL as "debug") ?? "error", name: "sandbox-e2b" }));
    started.push(() => mesh.stop());
    // Placement asks only nodes whose snapshot shows warm VMs: wait until the view has seen every warm pool filled.
    // The simulator fills them on timers after start, and the first poll may come before (on a loaded machine, it
    // does): each check asks the view to re-read the nodes, so the wait ends when the pools are warm, not at the
    // next --inventory-poll tick (60 s in some files).
    const wanted = (o.pools ?? DEFAULT_POOLS).filter((p) => !p.endsWith("=0")).length;
    const seen = () => mesh.fleet.nodes().length === cluster.nodes.length && mesh.fleet.nodes().every((n) => n.pools.filter((p) => p.warm > 0).length >= wanted);
    await waitFor("the mesh fleet to see every node's warm pools", () => seen() || (mesh.fleet.changed?.(), false), 30_000, 25);
    return {
      apiUrl: `http://127.0.0.1:${mesh.e2bPort}`,
      proxyUrl: mesh.proxyPort ? `http://127.0.0.1:${mesh.proxyPort}` : undefined,
      cluster,
      guest,
      mesh,
      dir,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** Connection options for the real e2b SDK against a stack. */
export function sdkOpts(s: Stack, apiKey = KEY_A) {
  return { apiKey, apiUrl: s.apiUrl, ...(s.proxyUrl ? { sandboxUrl: s.proxyUrl } : {}), domain: DOMAIN, requestTimeoutMs: 10_000 };
}
