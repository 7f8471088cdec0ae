import { describe, expect, test } from "bun:test";
import { NodeController } from "#services/vk-sandbox/node/node-controller.ts";
import { LAST_APPLIED_META, LAST_APPLIED_STATUS } from "#services/vk-sandbox/node/status-patch.ts";
import { FakeClock } from "#shared/clock/index.ts";
import { FakeKube, apiError, quietLog } from "./fake-kube.ts";

const spec = { nodeName: "n1", kubeletPort: 10260, cpu: "4000", memory: "8Ti", pods: "2000", extraLabels: {} };

const INTERVAL = 60_000;

function controller(kube: FakeKube, clock = new FakeClock()) {
  return new NodeController({ client: kube, spec, log: quietLog, statusIntervalMs: INTERVAL, clock });
}

describe("NodeController", () => {
  test("the constructor makes no calls", () => {
    const kube = new FakeKube();
    controller(kube);
    expect(kube.calls).toEqual([]);
  });

  test("a missing Node is created with the full object and no patch", async () => {
    const kube = new FakeKube();
    const c = controller(kube);
    await c.ensure();
    expect(kube.calls.map((x) => x.verb)).toEqual(["get", "create"]);
    expect((kube.calls[1]!.body as any).spec.taints).toHaveLength(1);
    expect(c.nodeRef()).toEqual({ name: "n1", uid: "uid-1" });
  });

  test("an existing Node gets only a status-subresource patch, never its spec", async () => {
    const kube = new FakeKube();
    kube.objects.set("nodes/n1", { metadata: { name: "n1", uid: "u", labels: {} }, spec: { taints: [] }, status: {} });
    const c = controller(kube);
    await c.ensure();
    expect(kube.count("create")).toBe(0);
    const p = kube.calls.find((x) => x.verb === "patch")!;
    expect(p.opts).toMatchObject({ type: "strategic", subresource: "status" });
    const body = p.body as any;
    expect(body.spec).toBeUndefined();
    expect(body.metadata.labels.type).toBe("virtual-kubelet");
    expect(JSON.parse(body.metadata.annotations[LAST_APPLIED_STATUS]).capacity).toEqual({ cpu: "4000", memory: "8Ti", pods: "2000" });
    expect(JSON.parse(body.metadata.annotations[LAST_APPLIED_META]).labels.type).toBe("virtual-kubelet");
  });

  test("markReady pushes Ready True at once, with a heartbeat on every condition", async () => {
    const kube = new FakeKube();
    const c = controller(kube);
    await c.ensure();
    await c.markReady();
    const body = kube.calls.at(-1)!.body as any;
    const ready = body.status.conditions.find((x: any) => x.type === "Ready");
    expect(ready).toMatchObject({ status: "True", reason: "KubeletReady", message: "Kubelet is ready" });
    expect(body.status.conditions.every((x: any) => typeof x.lastHeartbeatTime === "string")).toBe(true);
    expect(body.status.phase).toBe("Running");
  });

  test("the status loop patches once per interval, starting one interval after start", async () => {
    const kube = new FakeKube();
    const clock = new FakeClock();
    const c = controller(kube, clock);
    await c.ensure();
    c.start();
    await clock.tick(INTERVAL - 1);
    expect(kube.count("patch")).toBe(0);
    await clock.tick(1);
    expect(kube.count("patch")).toBe(1);
    await clock.tick(2 * INTERVAL);
    expect(kube.count("patch")).toBe(3);
    const heartbeat = (kube.calls.at(-1)!.body as any).status.conditions[0].lastHeartbeatTime;
    expect(heartbeat).toBe(new Date(clock.now()).toISOString());
    await c.stop();
    await clock.tick(10 * INTERVAL);
    expect(kube.count("patch")).toBe(3);
  });

  test("a 409 re-reads the Node and retries", async () => {
    const kube = new FakeKube();
    const c = controller(kube);
    await c.ensure();
    kube.failures.patch = [apiError(409, "Conflict")];
    await c.markReady();
    expect(kube.calls.slice(-3).map((x) => x.verb)).toEqual(["patch", "get", "patch"]);
  });

  test("a Node deleted while running is not recreated and the gone signal fires", async () => {
    const kube = new FakeKube();
    const clock = new FakeClock();
    const c = controller(kube, clock);
    await c.ensure();
    c.start();
    kube.objects.delete("nodes/n1");
    await clock.tick(INTERVAL);
    await c.whenGone;
    expect(c.gone).toBe(true);
    const patches = kube.count("patch");
    await clock.tick(10 * INTERVAL);
    expect(kube.count("patch")).toBe(patches);
    expect(kube.count("create")).toBe(1);
    await c.stop();
  });

  test("a failed patch is logged and retried next tick, never fatal", async () => {
    const kube = new FakeKube();
    const clock = new FakeClock();
    const c = controller(kube, clock);
    await c.ensure();
    kube.failures.patch = [apiError(500, "InternalError")];
    c.start();
    await clock.tick(INTERVAL);
    expect(kube.count("patch")).toBe(1);
    await clock.tick(INTERVAL);
    expect(kube.count("patch")).toBe(2);
    expect(kube.objects.get("nodes/n1").metadata.annotations[LAST_APPLIED_STATUS]).toBeDefined(); // the retry landed
    expect(c.gone).toBe(false);
    await c.stop();
  });
});
