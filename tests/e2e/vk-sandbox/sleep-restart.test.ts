// Issue 28 item 6 across a real restart: a Pod's sandbox that its node put to sleep by itself (the pool's
// idle_hibernate_seconds on the sandboxd simulator) is hibernated, not lost. With the vk-sandbox process SIGKILLed
// and started again while the sandbox sleeps, the Pod stays Running on the same claim and start time, nothing is
// released or claimed, no SandboxLost is reported, and the sandbox is still asleep afterwards (vk-sandbox makes no
// data-plane call that would wake it). What this checks is the restart path: adoption and the startup verification
// of a hibernated claim. The periodic loops (lease watch, orphan scan) run on periods longer than this window; their
// treatment of a sleeping sandbox is tests/unit/services/vk-sandbox/provider/sleep.test.ts, on a fake clock (a planted
// slip that drops hibernated rows from the node's listing fails that test).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { sandboxPod } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import { providerPods, readClaimsTable, runningPod, simClaimsFor, simRequests, useE2eStack } from "./stack.ts";

// Sandboxes of the pool fall asleep after 2 s without data-plane traffic.
const env = useE2eStack({ sim: { pools: ["base=4,idle=2"] } });

describe("a sandbox asleep by itself across a vk-sandbox restart", () => {
  test("SIGKILL and restart while asleep: the Pod keeps Running on its claim, nothing released or claimed, no SandboxLost, still asleep", async () => {
    const statePath = join(env.stack.dir, "asleep", "claims.json");
    const first = env.stack.daemon({ node: "vk-asleep", statePath });
    await first.waitForLog(/vk-sandbox ready/);
    await env.e2e.kube.createPod(sandboxPod("sleeper", "vk-asleep"));
    const before = await runningPod(env.e2e.kube, "ns", "sleeper");
    const claimId = before.metadata!.annotations!["sandbox.cocoonstack.io/claim-id"]!;
    await waitFor("the node put the sandbox to sleep", async () => (simClaimsFor(env.stack.sim, "ns/sleeper")[0]?.state === "hibernated" ? true : undefined), 30_000);

    await first.kill("SIGKILL");
    const released = simRequests(env.stack.sim, "release");
    const claimed = simRequests(env.stack.sim, "claim");
    const second = env.stack.daemon({ node: "vk-asleep", statePath });
    await second.waitForLog(/vk-sandbox ready/);
    await waitFor("the restarted provider adopted the Pod", async () => ((await providerPods(second.port, env.e2e.cluster.kubeletClient)).includes("sleeper") ? true : undefined), 30_000);
    // A window for the restarted daemon's loops (status push, owner recheck, verification) to act on the sleeper:
    // what is asserted is that none of them releases, reclaims or reports it lost.
    await Bun.sleep(3000);

    const after = await runningPod(env.e2e.kube, "ns", "sleeper");
    expect(after.status?.phase).toBe("Running");
    expect(after.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(claimId);
    expect(String(after.status?.startTime)).toBe(String(before.status?.startTime));
    expect(simRequests(env.stack.sim, "release")).toBe(released);
    expect(simRequests(env.stack.sim, "claim")).toBe(claimed);
    expect(readClaimsTable(statePath).claims["ns/sleeper"]?.id).toBe(claimId);
    const claim = simClaimsFor(env.stack.sim, "ns/sleeper");
    expect(claim.map((c) => [c.id, c.state])).toEqual([[claimId, "hibernated"]]);
    const events = (await (await env.e2e.cluster.adminFetch("/api/v1/namespaces/ns/events")).json()) as { items: Array<{ reason?: string; involvedObject?: { name?: string } }> };
    expect(events.items.filter((e) => e.involvedObject?.name === "sleeper" && e.reason === "SandboxLost")).toEqual([]);
    expect(second.log()).not.toContain("SandboxLost");
    await second.kill("SIGKILL");
  }, 120_000);
});
