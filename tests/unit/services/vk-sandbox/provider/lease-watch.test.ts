import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { FakeClock, harness, makeSandboxd, pod, scratchDirs } from "./helpers.ts";

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

  test("no candidate means no listing", async () => {
    const { h } = await running("3600");
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
