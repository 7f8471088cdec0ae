// The local stack (issue 11 "ready in under 15 s once the peers are built") and its data plane, each against a
// baseline from the same run:
//   - `bun scripts/stack.ts` (full) from spawn to the printed export lines vs the real kube-apiserver alone;
//   - `bun scripts/stack.ts --mesh` the same vs a bare Bun process start (the floor any stack pays);
//   - the stock SDK's commands.run("echo hello") on the mesh stack (e2b surface, envd proxy, node relay, guest)
//     vs the same call straight to the sandbox's guest agent, p50 and p99.
// Ports come free from the OS; the API key and logs go to a throwaway state dir.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { startKubeApiserver } from "../kube/harness.ts";
import { freePort } from "../e2e/stack/run-stack.ts";
import { PORTS, type PortName } from "#scripts/stack/ports.ts";
import { cores, percentile, type Figure } from "./vk-sandbox-pods.bench.ts";
import { startSandboxdSim } from "#services/sandboxd-sim/sim.ts";

const COMMAND = "bun run bench -- stack";
const REPO = join(import.meta.dir, "../..");
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

export interface Started {
  seconds: number;
  /** The stack process (its children are the binaries). */
  pid: number;
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** Start the stack from source (peers already built) and time it to the ready line. */
export async function startTimed(args: string[], extraEnv: Record<string, string> = {}): Promise<Started> {
  const env: Record<string, string> = { ...(process.env as Record<string, string>), ...extraEnv };
  for (const name of Object.keys(PORTS) as PortName[]) env[PORTS[name].env] = String(await freePort());
  const state = mkdtempSync(join(tmpdir(), "stack-bench-"));
  env.STACK_STATE_DIR = state;
  const t0 = performance.now();
  const errLog = join(state, "stack-stderr.log");
  const proc = Bun.spawn([process.execPath, "scripts/stack.ts", ...args], { cwd: REPO, env, stdout: "pipe", stderr: Bun.file(errLog) });
  const exported: Record<string, string> = {};
  const decoder = new TextDecoder();
  let buf = "";
  let seconds = 0;
  const reader = proc.stdout.getReader();
  while (!seconds) {
    const { done, value } = await reader.read();
    if (done) {
      const tail = (await Bun.file(errLog).text().catch(() => "")).trim().split("\n").slice(-6).join(" / ");
      throw new Error(`stack ${args.join(" ")} exited before it was ready: ${tail}`);
    }
    buf += decoder.decode(value);
    for (const line of buf.split("\n")) {
      const m = /^export ([A-Z0-9_]+)=(.*)$/.exec(line);
      if (m) exported[m[1]!] = m[2]!;
      if (line.includes("Ctrl-C stops everything")) seconds = (performance.now() - t0) / 1000;
    }
  }
  reader.releaseLock();
  void proc.stdout.pipeTo(new WritableStream()); // keep draining
  return {
    seconds,
    pid: proc.pid,
    env: exported,
    stop: async () => {
      proc.kill("SIGINT");
      await proc.exited;
      rmSync(state, { recursive: true, force: true });
    },
  };
}

async function latencies(sb: Sandbox, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await sb.commands.run("echo hello");
    out.push(performance.now() - t);
  }
  return out;
}

export async function stackFigures(): Promise<Figure[]> {
  const figures: Figure[] = [];

  // Full stack vs the kube-apiserver it starts first.
  const k0 = performance.now();
  const kube = await startKubeApiserver();
  const kubeSeconds = (performance.now() - k0) / 1000;
  await kube.stop();
  const full = await startTimed([]);
  await full.stop();
  figures.push({
    name: "full stack ready (spawn → export lines)",
    value: round(full.seconds),
    unit: "s",
    command: COMMAND,
    cores,
    baseline: { name: "the kube-apiserver alone (test peer, embedded etcd)", value: round(kubeSeconds), unit: "s" },
    anchor: "issue 11: ready in under 15 s once the peers are built",
    notes: "kube-apiserver, 2 simulated nodes + 2 vk-sandbox, sandbox-apiserver via the aggregation layer (e2b surface, warm-pool driver), sandbox-envd-proxy; from source",
  });

  // Mesh stack vs a bare Bun start.
  const b0 = performance.now();
  await Bun.spawn([process.execPath, "-e", ""]).exited;
  const bunSeconds = (performance.now() - b0) / 1000;
  const mesh = await startTimed(["--mesh"]);
  figures.push({
    name: "mesh stack ready (spawn → export lines)",
    value: round(mesh.seconds),
    unit: "s",
    command: COMMAND,
    cores,
    baseline: { name: "a bare Bun process start and exit", value: round(bunSeconds, 3), unit: "s" },
    anchor: "issue 11: ready in under 15 s once the peers are built",
    notes: "2 simulated nodes with guest agents, sandbox-e2b with the envd proxy in-process; from source",
  });

  // commands.run through the whole mesh data plane vs straight to a guest agent (same code, in this process).
  const opts = { apiKey: mesh.env.E2B_API_KEY!, apiUrl: mesh.env.E2B_API_URL!, sandboxUrl: mesh.env.E2B_SANDBOX_URL! };
  const sb = await Sandbox.create("base", opts);
  const sim = await startSandboxdSim({ rootToken: "bench-root", guestAgents: true });
  try {
    await latencies(sb, 10); // warm-up
    const relayed = await latencies(sb, 200);
    const claim = (await (await fetch(`${sim.url}/v1/claim`, { method: "POST", headers: { authorization: "Bearer bench-root" }, body: JSON.stringify({ template: "base" }) })).json()) as { id: string };
    const guestUrl = `http://127.0.0.1:${sim.node.guestHost!.target(claim.id, 49983)!.port}`;
    await fetch(`${guestUrl}/init`, { method: "POST", body: JSON.stringify({ accessToken: "bench-token" }) });
    const Ctor = Sandbox as unknown as new (o: Record<string, unknown>) => Sandbox;
    const direct = new Ctor({ sandboxId: claim.id.replace("_", "-"), envdAccessToken: "bench-token", envdVersion: "0.8.0", sandboxUrl: guestUrl, apiKey: "unused" });
    await latencies(direct, 10);
    const straight = await latencies(direct, 200);
    for (const p of [50, 99]) {
      figures.push({
        name: `commands.run("echo hello") p${p}, mesh stack`,
        value: round(percentile(relayed, p)),
        unit: "ms",
        command: COMMAND,
        cores,
        baseline: { name: "the same call straight to a guest agent", value: round(percentile(straight, p)), unit: "ms" },
        notes: "SDK → envd proxy (fresh node tunnel per request) → node ports relay → guest; each run spawns /bin/bash -l; 200 sequential runs after 10 warm-up",
      });
    }
  } finally {
    await sb.kill();
    await sim.stop();
    await mesh.stop();
  }
  return figures;
}

if (import.meta.main) console.log(JSON.stringify(await stackFigures(), null, 2));
