import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { FakeClock, harness, makeSandboxd, pod, readTable, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();
async function running(ttl = "60") {
  const clock = new FakeClock();
  const h = await harness({ path: join(tmp(), "claims.json"), clock, sandboxd: await makeSandboxd(clock) });
  await h.p.createPod(pod({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": ttl }, containers: [{ name: "a", image: "img-a" }, { name: "b", image: "img-b" }] }));
  const id = h.sandboxd.ids()[0]!;
  return { h, clock, id };
}

describe("lease watch", () => {
  test("a past deadline with the sandbox unlisted publishes Failed/SandboxLeaseExpired with exit-code-1 terminations", async () => {
    const { h, clock, id } = await running();
    const deadline = h.impl.core.st.claims.get("default/sb1")!.deadline;
    clock.advance(61_000);
    h.sandboxd.vanish(id); // reaped
    await h.impl.tick("lease-watch");
    const pushed = h.pushes.at(-1)!;
    expect(pushed.status?.phase).toBe("Failed");
    expect(pushed.status?.reason).toBe("SandboxLeaseExpired");
    expect(pushed.status?.message).toContain(new Date(deadline).toISOString().replace(".000Z", "Z"));
    expect(pushed.status?.podIP).toBeUndefined();
    expect(pushed.status?.conditions).toBeUndefined();
    expect(pushed.status?.containerStatuses?.map((c) => [c.name, c.image, c.ready, c.state?.terminated?.exitCode, c.state?.terminated?.reason])).toEqual([
      ["a", "img-a", false, 1, "SandboxLeaseExpired"],
      ["b", "img-b", false, 1, "SandboxLeaseExpired"],
    ]);
    expect(pushed.status?.containerStatuses?.[0]?.state?.terminated?.finishedAt).toEqual(new Date(deadline));
    expect(pushed.status?.containerStatuses?.[0]?.imageID).toBe(`sandboxd://${id}`);
    expect(h.p.getPodStatus("default", "sb1")?.phase).toBe("Failed");
  });

  test("a past cached deadline with a later listed one keeps the pod Running and adopts the listed deadline", async () => {
    const { h, clock, id } = await running();
    clock.advance(61_000);
    const later = clock.now() + 3_600_000;
    h.sandboxd.setDeadline(id, later);
    const pushes = h.pushes.length;
    await h.impl.tick("lease-watch");
    expect(h.pushes.length).toBe(pushes);
    expect(h.impl.core.st.claims.get("default/sb1")?.deadline).toBe(later);
    expect(h.p.getPodStatus("default", "sb1")?.phase).toBe("Running");
  });

  test("a failing listing publishes nothing", async () => {
    const { h, clock, id } = await running();
    clock.advance(61_000);
    h.sandboxd.vanish(id);
    h.sandboxd.failLists(true);
    const pushes = h.pushes.length;
    await h.impl.tick("lease-watch");
    expect(h.pushes.length).toBe(pushes);
    expect(h.impl.core.st.claims.get("default/sb1")).toBeDefined();
  });

  test("no Pod served means no listing", async () => {
    const { h } = await running("3600");
    await h.p.deletePod(h.p.getPod("default", "sb1")!); // owner unknown to the fake reader: released
    const lists = h.sandboxd.listCalls.n;
    await h.impl.tick("lease-watch");
    expect(h.sandboxd.listCalls.n).toBe(lists);
  });

  test("the loop fires every 30 s on the injected clock", async () => {
    const { h, clock, id } = await running();
    h.sandboxd.vanish(id);
    h.start();
    clock.advance(30_000); // first tick: the lease is not yet past
    await h.impl.loop("lease-watch").untilTicks(1);
    clock.advance(30_000); // second tick: past, unlisted
    await h.pushCount.until(2);
    await h.stop();
    expect(h.pushes.at(-1)?.status?.reason).toBe("SandboxLeaseExpired");
  });
});

describe("issue 7 case 11: a sandbox lost before its deadline", () => {
  test("two consecutive successful listings without it: Failed/SandboxLost naming the id, a Warning event, the row dropped", async () => {
    const { h, id } = await running("3600");
    const warnings: Array<{ reason: string; message: string }> = [];
    h.impl.core.events = { warning: (_pod, reason, message) => void warnings.push({ reason, message }) };
    h.sandboxd.vanish(id); // deleted behind the daemon's back
    const pushes = h.pushes.length;
    await h.impl.tick("lease-watch"); // first listing without it: nothing yet
    expect(h.pushes.length).toBe(pushes);
    h.sandboxd.failLists(true);
    await h.impl.tick("lease-watch"); // a failed listing neither counts nor resets
    expect(h.pushes.length).toBe(pushes);
    h.sandboxd.failLists(false);
    await h.impl.tick("lease-watch"); // second successful listing without it
    const lost = h.pushes.at(-1)!;
    expect(lost.status?.phase).toBe("Failed");
    expect(lost.status?.reason).toBe("SandboxLost");
    expect(lost.status?.message).toContain(id);
    expect(lost.status?.containerStatuses?.map((c) => c.state?.terminated?.reason)).toEqual(["SandboxLost", "SandboxLost"]);
    expect(warnings).toEqual([{ reason: "SandboxLost", message: expect.stringContaining(id) }]);
    expect(h.impl.core.st.claims.has("default/sb1")).toBe(false);
    expect(readTable(h.store.path).claims).toEqual({});
    expect(h.sandboxd.releaseCalls.n).toBe(0); // nothing is left to release
  });

  test("a sandbox missing from one listing and back in the next is not lost", async () => {
    const { h, id } = await running("3600");
    h.sandboxd.failLists(false);
    await h.impl.tick("lease-watch");
    expect(h.impl.core.st.missing.size).toBe(0);
    expect(h.sandboxd.has(id)).toBe(true);
    await h.impl.tick("lease-watch");
    expect(h.pushes.at(-1)?.status?.phase).toBe("Running");
  });
});
