// Issue 7 case 4: scenario 35 after a 10-minute sandboxd outage, not a few seconds. The whole daemon runs
// in-process (wire.ts, exactly as main starts it) against a real kube-apiserver, authenticated as the node's own
// manifests/rbac.yaml ServiceAccount (sandbox-nodes/<node>), with the provider's loops and the pod queues on a fake
// clock shared with the sandboxd simulator: ten minutes pass in a few seconds, and "within 15 s of sandboxd's return" is measured on
// that clock. The outage is real: a gate in front of the simulator closes its port (connection refused).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { FakeClock } from "#shared/clock/index.ts";
import { Shutdown } from "#shared/lifecycle/shutdown.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { parseVkSandboxFlags } from "#services/vk-sandbox/flags.ts";
import { startVkSandbox } from "#services/vk-sandbox/wire.ts";
import { freePorts } from "../../kube/ports.ts";
import { CLAIM_ID, sandboxPod, startE2eCluster, type E2eCluster } from "../../e2e/vk-sandbox/cluster.ts";
import { Gate, providerPods, SANDBOXD_TOKEN } from "../../e2e/vk-sandbox/stack.ts";
import { readFileSync } from "node:fs";

const NODE = "vk-outage";
let e2e: E2eCluster;
let sim: SandboxdSim;
let gate: Gate;
let dir: string;
const clock = new FakeClock(Math.floor(Date.now() / 1000) * 1000);
const lines: Array<Record<string, unknown>> = [];
const log = pino({ level: "debug" }, { write: (s: string) => void lines.push(JSON.parse(s)) });
const shutdowns: Shutdown[] = [];

beforeAll(async () => {
  e2e = await startE2eCluster();
  sim = await startSandboxdSim({ clock, rootToken: SANDBOXD_TOKEN, pools: ["base=10"], seed: 35 });
  gate = new Gate(sim.url);
  gate.up();
  dir = mkdtempSync(join(tmpdir(), "vk-outage-"));
  writeFileSync(join(dir, "token"), SANDBOXD_TOKEN, { mode: 0o600 });
}, 120_000);

afterAll(async () => {
  for (const s of shutdowns) await s.shutdown("test end");
  await gate?.down();
  await sim?.stop();
  await e2e?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Starts the daemon in-process on the shared fake clock. */
async function daemon(node = NODE) {
  const outcome = parseVkSandboxFlags(
    [
      `--node-name=${node}`,
      `--listen-addr=127.0.0.1:${freePorts(1)[0]}`,
      `--sandboxd-url=${gate.url}`,
      `--sandboxd-token-file=${join(dir, "token")}`,
      `--state-path=${join(dir, node, "claims.json")}`,
      `--client-ca-file=${e2e.cluster.clientCaFile}`,
    ],
    {},
  );
  if (outcome.kind !== "run") throw new Error("flags did not parse to a run");
  const shutdown = new Shutdown({ logger: log, exit: () => {}, signals: { on() {}, off() {} } });
  shutdowns.push(shutdown);
  const vk = await startVkSandbox({ config: outcome.config, log, env: { KUBECONFIG: e2e.nodeKubeconfig(node) }, shutdown, clock });
  return { vk, shutdown };
}

/** Moves the fake clock `ms` in `step` slices, letting real I/O (apiserver, refused connections) run between. */
async function pass(ms: number, step = 500): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    await clock.tick(Math.min(step, ms - t));
    await Bun.sleep(2);
  }
}

/** Advances the fake clock until `cond` holds; returns the fake time it took. Fails after `limitMs` of it. */
async function within(limitMs: number, what: string, cond: () => Promise<boolean>): Promise<number> {
  const start = clock.now();
  for (;;) {
    if (await cond()) return clock.now() - start;
    if (clock.now() - start >= limitMs) throw new Error(`${what}: not within ${limitMs / 1000} s of fake time`);
    await pass(250, 250);
    await Bun.sleep(20);
  }
}

const podOf = (name: string) => e2e.kube.pod("ns", name);
const claimOf = async (name: string) => (await podOf(name))?.metadata?.annotations?.[CLAIM_ID];

describe("issue 7 case 4: a 10-minute sandboxd outage (fake clock, real apiserver, in-process daemon)", () => {
  test("scenario 35 after 10 minutes: pods run on their original claims within 15 s of sandboxd's return, and a bare Pod force-deleted meanwhile is released", async () => {
    const first = await daemon();
    const names = ["keep1", "keep2", "gone"];
    for (const n of names) await e2e.kube.createPod(sandboxPod(n, NODE));
    const before = new Map<string, string>();
    await within(60_000, "pods Running", async () => {
      for (const n of names) {
        const p = await podOf(n);
        if (p?.status?.phase !== "Running" || !p.metadata?.annotations?.[CLAIM_ID]) return false;
        before.set(n, p.metadata.annotations[CLAIM_ID]!);
      }
      return true;
    });
    await first.shutdown.shutdown("restart");

    // Restart while sandboxd is unreachable: every row stays quarantined.
    await gate.down();
    const second = await daemon();
    const releases0 = sim.requests.filter((r) => r.route === "release").length;
    const claims0 = sim.requests.filter((r) => r.route === "claim").length;

    await pass(120_000);
    // The bare Pod is force-deleted two minutes into the outage; its release cannot reach sandboxd yet.
    await e2e.kube.deletePod("ns", "gone", 0);
    await pass(480_000);
    for (const n of ["keep1", "keep2"]) {
      const p = await podOf(n);
      expect(p?.status?.phase).toBe("Running"); // an outage is not evidence
      expect(p?.metadata?.annotations?.[CLAIM_ID]).toBe(before.get(n)!);
    }
    expect(await providerPods(second.vk.kubeletPort, e2e.cluster.kubeletClient)).toEqual([]);
    expect(sim.claims().some((c) => c.id === before.get("gone"))).toBe(true);

    // sandboxd returns after 10 minutes.
    gate.up();
    const took = await within(16_000, "pods adopted on their original claims and the deleted Pod's VM released", async () => {
      const held = await providerPods(second.vk.kubeletPort, e2e.cluster.kubeletClient);
      return held.includes("keep1") && held.includes("keep2") && !sim.claims().some((c) => c.id === before.get("gone"));
    });
    expect(took).toBeLessThanOrEqual(16_000);
    for (const n of ["keep1", "keep2"]) expect(await claimOf(n)).toBe(before.get(n)!);
    // Nothing claimed; exactly the deleted Pod's VM released.
    expect(sim.requests.filter((r) => r.route === "claim").length).toBe(claims0);
    const released = sim.requests.slice(0).filter((r) => r.route === "release" && r.outcome === 204);
    expect(released.length - releases0).toBeGreaterThanOrEqual(1);
    expect(released.map((r) => r.path.split("/")[3])).toContain(before.get("gone")!);
    expect(lines.some((l) => String(l.msg).includes("dropping"))).toBe(false);
  }, 180_000);

  test("case 11: a sandbox released behind the daemon's back: after two successful listings the Pod is Failed/SandboxLost with an Event and its row is dropped; hibernated and archived ones stay", async () => {
    const node = "vk-lost";
    const { vk } = await daemon(node);
    const names = ["lost", "asleep", "archived"];
    for (const n of names) await e2e.kube.createPod(sandboxPod(n, node));
    const ids = new Map<string, string>();
    await within(60_000, "pods Running", async () => {
      for (const n of names) {
        const p = await podOf(n);
        if (p?.status?.phase !== "Running" || !p.metadata?.annotations?.[CLAIM_ID]) return false;
        ids.set(n, p.metadata.annotations[CLAIM_ID]!);
      }
      return (await providerPods(vk.kubeletPort, e2e.cluster.kubeletClient)).length === 3;
    });
    // Out of band: an operator releases one with the root token; the others are paused and archived by sandboxd.
    const r = await fetch(`${sim.url}/v1/sandboxes/${ids.get("lost")}/release`, { method: "POST", headers: { authorization: `Bearer ${SANDBOXD_TOKEN}` } });
    expect(r.status).toBe(204);
    sim.hibernate(ids.get("asleep")!);
    sim.archive(ids.get("archived")!);

    await pass(31_000); // one successful listing without it: not yet
    expect((await podOf("lost"))?.status?.phase).toBe("Running");
    const failed = await within(31_000, "lost Pod Failed", async () => (await podOf("lost"))?.status?.phase === "Failed");
    expect(failed).toBeLessThanOrEqual(31_000);
    const lost = (await podOf("lost"))!;
    expect(lost.status?.reason).toBe("SandboxLost");
    expect(lost.status?.message).toContain(ids.get("lost")!);
    const events = await within(10_000, "SandboxLost event", async () =>
      (await e2e.kube.events("ns")).some((e) => e.involvedObject.name === "lost" && e.reason === "SandboxLost" && e.type === "Warning"),
    );
    expect(events).toBeGreaterThanOrEqual(0);
    const table = JSON.parse(readFileSync(join(dir, node, "claims.json"), "utf8")) as { claims: Record<string, { id: string }> };
    expect(Object.keys(table.claims).sort()).toEqual(["ns/archived", "ns/asleep"]);
    for (const n of ["asleep", "archived"]) expect((await podOf(n))?.status?.phase).toBe("Running");
  }, 120_000);
});
