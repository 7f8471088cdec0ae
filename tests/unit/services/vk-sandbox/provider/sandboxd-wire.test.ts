// What the provider puts on the wire, read from the simulator's request log (needs the simulator: under
// VK_PROVIDER_SANDBOXD=stub there is no wire to read, so these are skipped).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { bare, claimMetadataOf, FakeClock, harness, makeSandboxd, pod, scratchDirs, type SimSandboxd } from "./helpers.ts";

const stub = process.env.VK_PROVIDER_SANDBOXD === "stub";
const tmp = scratchDirs();
async function simHarness() {
  const dir = tmp();
  const clock = new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
  const sandboxd = (await makeSandboxd(clock)) as SimSandboxd;
  const h = await harness({ path: join(dir, "claims.json"), clock, sandboxd });
  return { h, sim: sandboxd.sim };
}

describe.skipIf(stub)("sandboxd wire", () => {
  test("the claim body carries template, ttl_seconds 86400, claim_ref ns/name and the vk-sandbox metadata, with the node token", async () => {
    const { h, sim } = await simHarness();
    await h.p.createPod(pod({ ns: "team", name: "a" }));
    const claims = sim.log.find("claim");
    expect(claims).toHaveLength(1);
    expect(claims[0]!.body).toEqual({ template: "python", ttl_seconds: 86_400, claim_ref: "team/a", metadata: claimMetadataOf("a") });
    expect(claims[0]!.auth).toBe("root");
    expect(claims[0]!.outcome).toBe(200);
  });

  test("ttl-seconds 0 sends no ttl_seconds and sandboxd grants its 5-minute default", async () => {
    const { h, sim } = await simHarness();
    await h.p.createPod(pod({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": "0" } }));
    expect(sim.log.find("claim")[0]!.body).toEqual({ template: "python", claim_ref: "default/sb1", metadata: claimMetadataOf("sb1") });
    expect(h.impl.core.st.claims.get("default/sb1")!.deadline - h.clock.now()).toBe(300_000);
  });

  test("a release carries the claim's own token, listings the node token", async () => {
    const { h, sim } = await simHarness();
    await h.p.createPod(bare());
    await h.impl.tick("orphan-scan");
    await h.p.deletePod(bare());
    const release = sim.log.find("release");
    expect(release).toHaveLength(1);
    expect(release[0]!.auth).toBe("sandbox");
    expect(release[0]!.outcome).toBe(204);
    expect(sim.log.find("list")[0]!.auth).toBe("root");
    expect(sim.claims()).toHaveLength(0);
  });

  test("a sandbox reaped by sandboxd at its deadline turns the pod Failed on the next lease watch", async () => {
    const { h, sim } = await simHarness();
    await h.p.createPod(pod({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": "60" } }));
    h.clock.advance(66_000); // past the deadline and one 5 s reap tick
    expect(sim.claims()).toHaveLength(0);
    await h.impl.tick("lease-watch");
    expect(h.pushes.at(-1)?.status?.reason).toBe("SandboxLeaseExpired");
  });

  test("a claim whose reply was lost is reconciled onto the delivered sandbox, never a second claim", async () => {
    const { h, sim } = await simHarness();
    sim.reset("claim", "after");
    await h.p.createPod(bare());
    expect(sim.log.find("claim")).toHaveLength(1);
    expect(sim.claims()).toHaveLength(1);
    expect(h.impl.core.st.claims.get("default/sb1")?.id).toBe(sim.claims()[0]!.id);
    expect(h.pushes.at(-1)?.status?.phase).toBe("Running");
  });

  test("reconciling a lost reply never adopts a claim this node is already releasing under the same claim_ref", async () => {
    const { h, sim } = await simHarness();
    h.owners!.alive("sb1", "owner-sb1");
    await h.p.createPod(pod());
    const old = sim.claims()[0]!.id;
    await h.p.deletePod(pod()); // preserved for its live owner
    sim.fail("release", 500, { error: "release failed" }, Number.POSITIVE_INFINITY);
    sim.reset("claim", "after");
    // Another owner's pod of the same name: the old claim goes to releasing, a fresh one is claimed and its
    // reply is lost. Both carry claim_ref default/sb1; only the new one may be adopted.
    await h.p.createPod(pod({ uid: "other", owner: { name: "sb1", uid: "someone-else" } }));
    const held = h.impl.core.st.claims.get("default/sb1")!.id;
    expect(held).not.toBe(old);
    expect(sim.claims().map((c) => c.id).sort()).toEqual([old, held].sort());
    expect(h.impl.core.st.releasing.map((e) => e.claim.id)).toEqual([old]);
  });
});
