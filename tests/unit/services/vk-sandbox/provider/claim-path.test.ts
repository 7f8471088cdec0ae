// Claim-path leaks found in review (issue 7, cases 1–3), at provider level on the sandboxd simulator through the
// real SandboxdClient: a redirect is no capacity, a lost reply recovers only this node's own VM, and startup
// recovery trusts only what this daemon could have written. The process-level twins are in
// tests/e2e/vk-sandbox/claim-path.test.ts.
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { startSandboxdSim, startSimCluster, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { ClaimsFile, ClaimsStore } from "#services/vk-sandbox/claims/index.ts";
import { claimMetadata } from "#services/vk-sandbox/provider/claim-metadata.ts";
import { claimRequestFor } from "#services/vk-sandbox/provider/pod-contract.ts";
import { createSandboxProvider } from "#services/vk-sandbox/provider/sandbox-provider.ts";
import { bare, captureLog, FakeClock, NODE_NAME, pod, readTable, ROOT_TOKEN, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();
const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const s of stops.splice(0)) await s();
});
const CLAIM_ID = "sandbox.cocoonstack.io/claim-id";

/** A provider on `url` with the root token, one client attempt per call (counts stay exact). */
async function providerOn(url: string, clock: FakeClock, path = join(tmp(), "claims.json")) {
  const client = new SandboxdClient({ baseUrl: url, token: ROOT_TOKEN, retry: { attempts: 1 } });
  const { log, lines } = captureLog();
  const handle = createSandboxProvider({
    nodeName: NODE_NAME,
    claimer: client,
    releaser: client,
    lister: client,
    reader: client,
    store: new ClaimsStore(new ClaimsFile({ path })),
    log,
    clock,
  });
  const pushes: Array<{ phase?: string; podIP?: string; id?: string }> = [];
  handle.provider.notifyPods((p) => pushes.push({ phase: p.status?.phase, podIP: p.status?.podIP, id: p.metadata?.annotations?.[CLAIM_ID] }));
  await handle.ready;
  stops.push(() => handle.stop());
  return { ...handle, p: handle.provider, client, pushes, lines, path };
}

async function sim(clock: FakeClock, extra: Parameters<typeof startSandboxdSim>[0] = {}): Promise<SandboxdSim> {
  const s = await startSandboxdSim({ clock, seed: 1, rootToken: ROOT_TOKEN, advertiseAddr: "10.0.0.5:7777", pools: ["python=4"], ...extra });
  stops.push(() => s.stop());
  return s;
}

const clockAt = () => new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));

describe("case 1: a redirect is no warm capacity here and is never followed", () => {
  test("two-node mesh, local warm miss: the create fails as no warm capacity; nothing is claimed on the peer", async () => {
    const clock = clockAt();
    const mesh = await startSimCluster(2, { clock, seed: 1, rootToken: ROOT_TOKEN, pools: ["python=0"] });
    stops.push(() => mesh.stop());
    const [local, peer] = mesh.nodes as [SandboxdSim, SandboxdSim];
    // Same pool on both nodes; only the peer has warm VMs.
    local.setWarm("python/none/small", 0);
    peer.setWarm("python/none/small", 3);
    const h = await providerOn(local.url, clock);

    const err = await h.p.createPod(pod({ name: "a" })).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/no warm capacity/);
    // The local node answered with a redirect; no claim was replayed at the peer, none exists anywhere.
    expect(local.requests.filter((r) => r.route === "claim").map((r) => r.outcome)).toEqual([200]);
    expect(peer.requests.filter((r) => r.route === "claim")).toHaveLength(0);
    expect([...local.claims(), ...peer.claims()]).toHaveLength(0);
    expect(h.p.getPod("default", "a")).toBeUndefined();
    expect(h.pushes).toHaveLength(0);
    expect(readTable(h.path).claims).toEqual({});

    // Capacity returns locally: the retry claims here, and the Pod IP is this node's.
    local.setWarm("python/none/small", 1);
    await h.p.createPod(pod({ name: "a" }));
    expect(local.claims().map((c) => c.claimRef)).toEqual(["default/a"]);
    expect(h.pushes.at(-1)?.podIP).toBe(local.addr.split(":")[0]);
  });
});

describe("case 2: a lost claim reply recovers only this node's own VM", () => {
  test("a 500 after another root claim holds the same claim_ref: the other party's VM is not adopted", async () => {
    const clock = clockAt();
    const s = await sim(clock);
    const h = await providerOn(s.url, clock);
    // The aggregated apiserver's claim for the same object name: root token, same claim_ref, no vk-sandbox stamp.
    const other = await h.client.claim({ template: "python", claim_ref: "default/a" }, { reconcile: false });
    s.fail("claim", 500, { error: "internal error" });

    await expect(h.p.createPod(pod({ name: "a" }))).rejects.toThrow(/claim/);
    expect(h.p.getPod("default", "a")).toBeUndefined();
    expect(readTable(h.path).claims).toEqual({});
    // The retry claims its own sandbox; the other party's VM is untouched and never in our table.
    await h.p.createPod(pod({ name: "a" }));
    const row = readTable(h.path).claims["default/a"];
    expect(row.id).not.toBe(other.id);
    expect(s.claims().map((c) => c.id).sort()).toEqual([other.id, row.id].sort());
  });

  test("a reset after commit while another root claim holds the same claim_ref: our own VM is found and used, no second claim", async () => {
    const clock = clockAt();
    const s = await sim(clock);
    const h = await providerOn(s.url, clock);
    const other = await h.client.claim({ template: "python", claim_ref: "default/a" }, { reconcile: false });
    s.reset("claim", "after");

    await h.p.createPod(pod({ name: "a" }));
    const row = readTable(h.path).claims["default/a"];
    const ours = s.claims().filter((c) => c.id !== other.id);
    // Exactly one VM of ours exists (the one whose reply was lost), and the row holds it with its own token.
    expect(ours.map((c) => c.id)).toEqual([row.id]);
    expect(row.token).toBe(ours[0]!.token);
    expect(s.requests.filter((r) => r.route === "claim")).toHaveLength(2); // other party's + ours, no re-claim
    expect(h.pushes.at(-1)).toMatchObject({ phase: "Running", id: row.id });
  });
});

describe("case 3: startup recovery trusts only what this daemon could have written", () => {
  test("a tenant claim with forged vk-sandbox metadata is not recorded under the victim Pod after a restart", async () => {
    const clock = clockAt();
    const s = await sim(clock);
    s.setTenant("mallory", "tenant-token", 10);
    const victim = bare({ name: "victim" });
    const tenant = new SandboxdClient({ baseUrl: s.url, token: "tenant-token", retry: { attempts: 1 } });
    // Exactly the body this daemon would send for the victim Pod, stamp included, but with a tenant token.
    const forged = await tenant.claim({ ...claimRequestFor(victim), metadata: claimMetadata(NODE_NAME, victim) }, { reconcile: false });

    const path = join(tmp(), "claims.json");
    const h = await providerOn(s.url, clock, path); // the "restart": startup verification runs over the listing
    expect(readTable(path).claims).toEqual({});
    await h.p.createPod(victim);
    const row = readTable(path).claims["default/victim"];
    // The victim got a VM of its own; the tenant's VM was neither adopted nor released (left to the audit).
    expect(row.id).not.toBe(forged.id);
    expect(s.claims().some((c) => c.id === forged.id)).toBe(true);
  });

  test("a root claim stamped for another Pod UID is recorded for that UID only: a same-owner Pod with another UID does not adopt it", async () => {
    const clock = clockAt();
    const s = await sim(clock);
    const client = new SandboxdClient({ baseUrl: s.url, token: ROOT_TOKEN, retry: { attempts: 1 } });
    const first = pod({ name: "a", uid: "uid-first" });
    const lost = await client.claim({ ...claimRequestFor(first), metadata: claimMetadata(NODE_NAME, first) }, { reconcile: false });

    const h = await providerOn(s.url, clock);
    expect(readTable(h.path).claims["default/a"]).toMatchObject({ id: lost.id, podUID: "uid-first", authority: "uid-first" });
    // Same owner, new UID: not the Pod the stamp names, so it claims fresh and the recovered VM goes to release.
    await h.p.createPod(pod({ name: "a", uid: "uid-second" }));
    const row = readTable(h.path).claims["default/a"];
    expect(row.id).not.toBe(lost.id);
    await h.impl.tick("owner-recheck");
    expect(s.claims().map((c) => c.id)).toEqual([row.id]);
  });
});
