// The Pod path of issue 28 (item 6): a Pod's sandbox that its node puts to sleep by itself (the pool's
// idle_hibernate_seconds on the sandboxd simulator, services/sandboxd-sim/docs/sleep.md) is hibernated, not lost.
// The Pod stays Running, and vk-sandbox never releases the claim or reports SandboxLost: not on its lease watch,
// orphan scan, owner recheck or verification, and not across a restart while the sandbox sleeps. vk-sandbox never
// wakes it either (it makes no data-plane call): the next request with the sandbox's token does.
// The provider and the simulator share one fake clock, so the node's idle time passes with `advance`.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { poolSpec } from "#services/sandboxd-sim/sim.ts";
import { FakeClock, harness, makeSandboxd, pod, readTable, scratchDirs } from "./helpers.ts";
import { SimSandboxd } from "./sandboxd-doubles.ts";

const tmp = scratchDirs();

// The stub double (VK_PROVIDER_SANDBOXD=stub) has no idle clock: this rule is about the simulator's, so it needs it.
test.skipIf(process.env.VK_PROVIDER_SANDBOXD === "stub")("a sandbox asleep by itself keeps its Pod Running and its claim, across every loop and a restart", async () => {
  const clock = new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
  const sandboxd = await makeSandboxd(clock);
  if (!(sandboxd instanceof SimSandboxd)) throw new Error("expected the simulator-backed double");
  const node = sandboxd.sim;
  node.node.pools.replace([poolSpec("python/none/small=0,idle=60")]);
  const path = join(tmp(), "state", "claims.json");
  const p = pod({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": "86400" } });

  const h = await harness({ path, clock, sandboxd });
  await h.p.createPod(p);
  const [id] = sandboxd.ids();
  const started = h.pushes.at(-1)!.status?.startTime;
  expect(h.pushes.at(-1)!.status?.phase).toBe("Running");
  clock.advance(61_000);
  const claimOf = () => node.claims().find((c) => c.id === id);
  expect(claimOf()?.state).toBe("hibernated");

  // Half an hour asleep with every loop running: nothing pushed, nothing released, nothing woken.
  const pushes = h.pushes.length;
  for (let i = 0; i < 6; i++) {
    for (const loop of ["lease-watch", "orphan-scan", "owner-recheck", "verify"] as const) await h.impl.tick(loop);
    clock.advance(5 * 60_000);
  }
  expect(h.pushes.length).toBe(pushes);
  expect(h.p.getPodStatus("default", "sb1")?.phase).toBe("Running");
  expect(h.impl.core.st.claims.get("default/sb1")?.id).toBe(id);
  expect(sandboxd.releaseCalls.n).toBe(0);
  expect(h.lines.some((l) => String(l.msg).includes("SandboxLost") || String(l.msg).includes("no longer listed"))).toBe(false);
  expect(claimOf()?.state).toBe("hibernated");

  // A restart while it sleeps (a new provider on the same state file and node): the Pod adopts its row, no claim.
  const claims = sandboxd.claimCalls.n;
  const again = await harness({ path, clock, sandboxd });
  await again.p.createPod(p);
  expect(sandboxd.claimCalls.n).toBe(claims);
  const pushed = again.pushes.at(-1)!;
  expect(pushed.status?.phase).toBe("Running");
  expect(pushed.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(id);
  expect(String(pushed.status?.startTime)).toBe(String(started));
  for (let i = 0; i < 3; i++) {
    await again.impl.tick("lease-watch");
    clock.advance(30_000);
  }
  expect(again.pushes.at(-1)!.status?.reason).not.toBe("SandboxLost");
  expect(again.p.getPodStatus("default", "sb1")?.phase).toBe("Running");
  expect(readTable(path).claims["default/sb1"]?.id).toBe(id);
  expect(sandboxd.releaseCalls.n).toBe(0);
  expect(claimOf()?.state).toBe("hibernated");
});
