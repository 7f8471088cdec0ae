// The pieces every vk-sandbox e2e file combines: the sandboxd simulator in the test process (so a test can
// inspect its claim table and inject faults), a gate in front of it that can make sandboxd truly unreachable
// (connection refused, not an error answer), a token file, a state directory, and a daemon factory with the
// arguments a node would run with.
import { afterAll, beforeAll } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim, type SimOptions } from "#services/sandboxd-sim/sim.ts";
import { freePorts } from "../../kube/ports.ts";
import { DEFAULT_NODE, startE2eCluster, type E2eCluster } from "./cluster.ts";
import { Daemon } from "./daemon.ts";
import { waitFor } from "../../support/wait.ts";

export const SANDBOXD_TOKEN = "node-root-token";

/** An HTTP forwarder in front of the simulator; `down()` closes its port so calls fail with ECONNREFUSED. */
export class Gate {
  private server: ReturnType<typeof Bun.serve> | undefined;
  readonly port: number;
  constructor(private readonly target: string) {
    this.port = freePorts(1)[0]!;
  }
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  up(): void {
    if (this.server) return;
    const target = this.target;
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: this.port,
      idleTimeout: 0,
      async fetch(req) {
        const u = new URL(req.url);
        const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
        const r = await fetch(`${target}${u.pathname}${u.search}`, { method: req.method, headers: req.headers, body });
        return new Response(r.body, { status: r.status, headers: r.headers });
      },
    });
  }
  async down(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    await s?.stop(true);
  }
}

export interface Stack {
  sim: SandboxdSim;
  gate: Gate;
  tokenFile: string;
  dir: string;
  statePath: string;
  /** Starts the daemon as its own process with the node's usual flags plus `extra`. */
  /** `direct`: talk to the simulator itself, not through the gate (a reset must reach the daemon as a reset). */
  daemon(o?: { node?: string; extra?: string[]; env?: Record<string, string | undefined>; statePath?: string; direct?: boolean }): Daemon;
  stop(): Promise<void>;
}

export async function startStack(e2e: E2eCluster, simOpts: SimOptions = {}): Promise<Stack> {
  const sim = await startSandboxdSim({ rootToken: SANDBOXD_TOKEN, pools: ["base=20"], seed: 1, ...simOpts });
  const gate = new Gate(sim.url);
  gate.up();
  const dir = mkdtempSync(join(tmpdir(), "vk-e2e-state-"));
  const tokenFile = join(dir, "sandboxd-token");
  writeFileSync(tokenFile, `  ${SANDBOXD_TOKEN}\n`, { mode: 0o600 });
  const statePath = join(dir, "state", "claims.json");
  return {
    sim,
    gate,
    tokenFile,
    dir,
    statePath,
    daemon(o = {}) {
      const port = freePorts(1)[0]!;
      const node = o.node ?? DEFAULT_NODE;
      const d = Daemon.start({
        args: [
          `--node-name=${node}`,
          `--listen-addr=127.0.0.1:${port}`,
          `--sandboxd-url=${o.direct ? sim.url : gate.url}`,
          `--sandboxd-token-file=${tokenFile}`,
          `--state-path=${o.statePath ?? statePath}`,
          // The kubelet API verifies client certificates against the cluster's client CA: the tests read it with
          // the apiserver's kubelet client certificate (e2e.cluster.kubeletClient).
          `--client-ca-file=${e2e.cluster.clientCaFile}`,
          ...(o.extra ?? []),
        ],
        // Each node as its own ServiceAccount, as installed (manifests/rbac.yaml, node-admission.yaml).
        env: { KUBECONFIG: e2e.nodeKubeconfig(node), VK_LOG_LEVEL: "debug", ...o.env },
      });
      d.port = port;
      return d;
    },
    async stop() {
      await Daemon.killAll();
      await gate.down();
      await sim.stop();
    },
  };
}

export interface E2eFile {
  readonly e2e: E2eCluster;
  readonly stack: Stack;
}

/**
 * Registers the beforeAll/afterAll most e2e files share: one apiserver and one stack for the file (120 s to come
 * up), `prepare` run on the cluster before the stack starts, a daemon on `node` (when given) waited until ready,
 * and on the way out (also after a setup that failed or timed out) the stack stopped, then the apiserver. The fields read through to what beforeAll started, so
 * use them inside tests and hooks only.
 */
export function useE2eStack(o: { node?: string; sim?: SimOptions; prepare?: (e2e: E2eCluster) => Promise<void> } = {}): E2eFile {
  let e2e: E2eCluster | undefined;
  let stack: Stack | undefined;
  let starting: Promise<void> | undefined;
  beforeAll(async () => {
    starting = (async () => {
      e2e = await startE2eCluster();
      await o.prepare?.(e2e);
      stack = await startStack(e2e, o.sim);
      if (o.node) await stack.daemon({ node: o.node }).waitForLog(/vk-sandbox ready/);
    })();
    await starting;
  }, 120_000);
  // A beforeAll that timed out leaves its startup running: wait for it to end either way, then stop what it started,
  // so a failed file leaves no apiserver, daemon or simulator behind for the next one.
  afterAll(async () => {
    await starting?.catch(() => undefined);
    await stack?.stop();
    await e2e?.stop();
  });
  const started = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error("the e2e stack is not started: use it inside tests, after beforeAll");
    return v;
  };
  return {
    get e2e() {
      return started(e2e);
    },
    get stack() {
      return started(stack);
    },
  };
}

/**
 * The provider's own pod table, read through the kubelet API (/runningpods/) with a client certificate the daemon's
 * --client-ca-file verifies (the cluster's kubelet client certificate: system:masters, so the review allows it).
 */
export async function providerPods(port: number, client: { certPem: string; keyPem: string }): Promise<string[]> {
  const r = await fetch(`https://127.0.0.1:${port}/runningpods/`, { tls: { rejectUnauthorized: false, cert: client.certPem, key: client.keyPem } });
  if (r.status !== 200) throw new Error(`GET /runningpods/: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { items: { metadata: { name: string } }[] }).items.map((p) => p.metadata.name);
}

export const simRequests = (sim: SandboxdSim, route: string) => sim.requests.filter((r) => r.route === route).length;

/** Live (not released) sandboxes in the simulator claimed for a pod key. */
export function simClaimsFor(sim: SandboxdSim, key: string) {
  return sim.claims().filter((c) => c.claimRef === key);
}

/** A claims table row, as the restart tests read it from the daemon's state file. */
export type TableRow = { id: string; token: string; podUID: string; claimedAt?: string; owner?: { uid: string } };

/** The claims table at `path` (an empty one while the file does not exist). */
export function readClaimsTable(path: string): { claims: Record<string, TableRow>; releasing?: TableRow[] } {
  return existsSync(path) ? JSON.parse(readFileSync(path, "utf8")) : { claims: {} };
}

/** Waits until the Pod is Running and returns it. */
export function runningPod(kube: E2eCluster["kube"], ns: string, name: string) {
  return waitFor(`${ns}/${name} Running`, async () => {
    const p = await kube.pod(ns, name);
    return p?.status?.phase === "Running" && p;
  });
}
