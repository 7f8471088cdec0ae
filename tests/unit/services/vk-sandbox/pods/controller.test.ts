import { afterEach, describe, expect, test } from "bun:test";
import type { CoreV1Event } from "@kubernetes/client-node";
import { EventRecorder } from "#shared/kube/events.ts";
import { FakeClock } from "#shared/clock/index.ts";
import type { Clock } from "#shared/clock/index.ts";
import { OUTAGE_RETRY_MAX_MS, PodController } from "#services/vk-sandbox/pods/controller.ts";
import { errors, FakePods, FakeProvider, FakeWriter, HttpishError, makePod, quietLog, runningStatus, until } from "./fakes.ts";

let controllers: PodController[] = [];
afterEach(async () => {
  await Promise.all(controllers.map((c) => c.stop()));
  controllers = [];
});

function setup(opts: { dropNormal?: boolean; isTransient?: (e: unknown) => boolean; isOutage?: (e: unknown) => boolean; clock?: Clock; onPodRunning?: (ms: number) => void } = {}) {
  const pods = new FakePods();
  const api = new FakeWriter(pods);
  const provider = new FakeProvider();
  const events: CoreV1Event[] = [];
  const recorder = new EventRecorder({
    sink: { create: async (_ns, ev) => void events.push(ev), patch: async () => {} },
    component: "vk/pod-controller",
    dropNormal: opts.dropNormal,
  });
  const controller = new PodController({
    nodeName: "vk",
    provider,
    pods,
    api,
    errors,
    events: recorder,
    log: quietLog,
    workers: 2,
    isTransient: opts.isTransient,
    isOutage: opts.isOutage,
    clock: opts.clock,
    onPodRunning: opts.onPodRunning,
    notifyWaitMs: 300,
    notifyPollMs: 5,
  });
  controllers.push(controller);
  const reasons = async () => {
    await recorder.flush();
    return events.map((e) => e.reason);
  };
  return { pods, api, provider, controller, reasons, recorder };
}

describe("pod controller", () => {
  test("a pod bound to the node is created in the provider and its Running push lands with the claim id", async () => {
    const { pods, api, provider, controller, reasons } = setup();
    await controller.start();
    pods.add(makePod("a"));
    await until(() => pods.get("ns/a")?.status?.phase === "Running", "Running");
    expect(provider.creates).toHaveLength(1);
    const write = api.statusWrites.at(-1)!;
    expect(write.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe("sb_a");
    expect(write.metadata?.resourceVersion).toBe("1"); // the live resourceVersion at push time
    await controller.idle();
    expect(await reasons()).toEqual(["ProviderCreateSuccess"]);
  });

  test("issue 13: a pod's create event goes out once its Running status write has landed, not alongside it", async () => {
    const { pods, api, controller, reasons } = setup();
    let land!: () => void;
    api.statusGate = new Promise((r) => (land = r));
    await controller.start();
    pods.add(makePod("a"));
    await until(() => api.statusWrites.length === 1, "the status write sent");
    await new Promise((r) => setTimeout(r, 20));
    // The PUT is in flight: the event (which would compete with it at the apiserver) waits.
    expect(await reasons()).toEqual([]);
    land();
    await until(() => pods.get("ns/a")?.status?.phase === "Running", "Running");
    await controller.idle();
    expect(await reasons()).toEqual(["ProviderCreateSuccess"]);
  });

  test("issue 13: a Pod's way from the informer to its landed Running write is reported once", async () => {
    const running: number[] = [];
    const { pods, api, provider, controller } = setup({ onPodRunning: (ms) => running.push(ms) });
    let land!: () => void;
    api.statusGate = new Promise((r) => (land = r));
    await controller.start();
    pods.add(makePod("a"));
    await until(() => api.statusWrites.length === 1, "the status write sent");
    await new Promise((r) => setTimeout(r, 25));
    expect(running).toEqual([]); // not before the write lands
    land();
    await until(() => running.length === 1, "reported");
    expect(running[0]).toBeGreaterThanOrEqual(20);
    // A later push (a lease lost, a label) is not a start.
    provider.pushNow({ ...pods.get("ns/a")!, status: { ...runningStatus(), message: "again" } });
    await until(() => api.statusWrites.length === 2, "second write");
    await controller.idle();
    expect(running).toHaveLength(1);
  });

  test("a push deep-equal to the previous one is dropped", async () => {
    const { pods, api, provider, controller } = setup();
    await controller.start();
    pods.add(makePod("a"));
    await until(() => api.statusWrites.length === 1);
    provider.pushNow({ ...structuredClone(provider.getPod("ns", "a")!), status: runningStatus() });
    await controller.idle();
    expect(api.statusWrites).toHaveLength(1);
  });

  test("a push waits for its key to appear in the cache, and is dropped if it never does", async () => {
    const { pods, api, provider, controller } = setup();
    await controller.start();
    const early = makePod("late");
    provider.pushNow({ ...early, status: runningStatus() });
    pods.add(early);
    await until(() => api.statusWrites.length >= 1, "push after the key appeared");
    provider.pushNow({ ...makePod("never"), status: runningStatus() });
    await new Promise((r) => setTimeout(r, 400));
    expect(api.statusWrites.every((w) => w.metadata?.name !== "never")).toBe(true);
  });

  test("an update the provider does not care about makes no provider call", async () => {
    const { pods, provider, controller } = setup();
    await controller.start();
    pods.add(makePod("a"));
    await until(() => pods.get("ns/a")?.status?.phase === "Running");
    await controller.idle();
    pods.update((p) => (p.status = { ...p.status, message: "x" }), "ns/a");
    await controller.idle();
    expect(provider.creates).toHaveLength(1);
    expect(provider.updates).toHaveLength(0);
  });

  test("issue 13: the echo of our own status write (the claim-id annotation) queues no sync, so a Pod spends one sync token", async () => {
    const { pods, provider, controller } = setup();
    await controller.start();
    pods.add(makePod("a"));
    await until(() => pods.get("ns/a")?.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"] === "sb_a", "the claim id on the Pod");
    await controller.idle();
    expect(controller.syncQueue.stats().processed).toBe(1);
    // A change the provider has not seen still syncs.
    pods.update((p) => (p.metadata!.annotations = { ...p.metadata!.annotations, user: "x" }), "ns/a");
    await until(() => provider.updates.length === 1, "UpdatePod");
    expect(controller.syncQueue.stats().processed).toBe(2);
  });

  test("a label change reaches the provider as an update", async () => {
    const { pods, provider, controller } = setup();
    await controller.start();
    pods.add(makePod("a"));
    await until(() => pods.get("ns/a")?.status?.phase === "Running");
    pods.update((p) => (p.metadata!.labels = { x: "y" }), "ns/a");
    await until(() => provider.updates.length === 1, "UpdatePod");
    expect(provider.updates[0]!.metadata?.labels).toEqual({ x: "y" });
    expect(provider.creates).toHaveLength(1);
  });

  test("a failed create marks the pod Pending/ProviderFailed with a warning and retries with backoff", async () => {
    const { pods, api, provider, controller, reasons } = setup();
    provider.createError = new Error("no warm capacity");
    await controller.start();
    pods.add(makePod("a"));
    await until(() => provider.creates.length >= 3, "retries");
    const st = api.statusWrites[0]!.status!;
    expect(st).toMatchObject({ phase: "Pending", reason: "ProviderFailed", message: "no warm capacity" });
    expect(api.statusWrites[0]!.metadata?.resourceVersion).toBeUndefined();
    provider.createError = undefined;
    await until(() => pods.get("ns/a")?.status?.phase === "Running", "Running once capacity returns");
    expect((await reasons()).filter((r) => r === "ProviderCreateFailed").length).toBeGreaterThanOrEqual(1);
  });

  test("restartPolicy Never turns a failed create into a terminal Failed and stops retrying", async () => {
    const { pods, provider, controller } = setup();
    provider.createError = new Error("at capacity");
    await controller.start();
    pods.add(makePod("a", { restartPolicy: "Never" }));
    await until(() => pods.get("ns/a")?.status?.phase === "Failed", "Failed");
    await controller.idle();
    expect(provider.creates).toHaveLength(1);
  });

  test("a transient provider error leaves a pod that holds a claim untouched", async () => {
    const transient = Object.assign(new Error("sandboxd unreachable"), { transient: true });
    const { pods, api, provider, controller } = setup();
    provider.createError = transient;
    const pod = makePod("a", { restartPolicy: "Never" });
    pod.metadata!.annotations!["sandbox.cocoonstack.io/claim-id"] = "sb_old";
    pod.status = runningStatus();
    await controller.start();
    pods.add(pod);
    await until(() => provider.creates.length >= 3, "retries");
    expect(api.statusWrites).toHaveLength(0);
    expect(pods.get("ns/a")?.status?.phase).toBe("Running");
  });

  test("restartPolicy Never does not make a transient failure terminal", async () => {
    const transient = Object.assign(new Error("listing failed"), { transient: true });
    const { pods, api, provider, controller } = setup();
    provider.createError = transient;
    await controller.start();
    pods.add(makePod("a", { restartPolicy: "Never" }));
    await until(() => provider.creates.length >= 2, "retries");
    expect(api.statusWrites).toHaveLength(0);
    expect(pods.get("ns/a")?.status?.phase).toBeUndefined();
  });

  test("a running pod being deleted goes to the provider, then the grace-0 delete with its UID", async () => {
    const { pods, api, provider, controller, reasons } = setup();
    await controller.start();
    pods.add(makePod("a"));
    await until(() => pods.get("ns/a")?.status?.phase === "Running");
    pods.update((p) => {
      p.metadata!.deletionTimestamp = new Date();
      p.metadata!.deletionGracePeriodSeconds = 0;
    }, "ns/a");
    await until(() => !pods.get("ns/a"), "pod gone");
    expect(provider.deletes).toHaveLength(1);
    expect(api.deletes).toEqual([{ namespace: "ns", name: "a", uid: "uid-a" }]);
    expect(await reasons()).toContain("ProviderDeleteSuccess");
  });

  test("issue 13: a graceful delete costs one provider delete, one event and one final DELETE, though the final delete's own update (grace 0) syncs the pod again before it is gone", async () => {
    const { pods, api, provider, controller, reasons, recorder } = setup();
    api.goneAfterMs = 150;
    await controller.start();
    pods.add(makePod("a"));
    await until(() => pods.get("ns/a")?.status?.phase === "Running");
    // `kubectl delete`: the Pod's own grace period (1 s); the final delete then sets it to 0.
    pods.update((p) => {
      p.metadata!.deletionTimestamp = new Date();
      p.metadata!.deletionGracePeriodSeconds = 1;
    }, "ns/a");
    await until(() => pods.get("ns/a")?.metadata?.deletionGracePeriodSeconds === 0, "final delete sent", 5_000);
    await until(() => !pods.get("ns/a"), "pod gone");
    await controller.idle();
    expect(provider.deletes).toHaveLength(1);
    expect(api.deletes).toEqual([{ namespace: "ns", name: "a", uid: "uid-a" }]);
    expect((await reasons()).filter((r) => r === "ProviderDeleteSuccess")).toHaveLength(1);
    expect(recorder.counts.patched).toBe(0); // no second, aggregated ProviderDeleteSuccess
  });

  test("a grace period shortened after the provider delete brings the final delete forward, still once", async () => {
    const { pods, api, provider, controller } = setup();
    api.goneAfterMs = 100;
    await controller.start();
    pods.add(makePod("a"));
    await until(() => pods.get("ns/a")?.status?.phase === "Running");
    pods.update((p) => {
      p.metadata!.deletionTimestamp = new Date();
      p.metadata!.deletionGracePeriodSeconds = 600;
    }, "ns/a");
    await until(() => provider.deletes.length === 1, "provider delete");
    expect(api.deletes).toHaveLength(0);
    pods.update((p) => (p.metadata!.deletionGracePeriodSeconds = 0), "ns/a"); // kubectl delete --grace-period=0 --force
    await until(() => !pods.get("ns/a"), "pod gone");
    await controller.idle();
    expect(provider.deletes).toHaveLength(1);
    expect(api.deletes).toHaveLength(1);
  });

  test("a pod deleted with nothing running is force-deleted once, though its final delete's update syncs it again", async () => {
    const { pods, api, provider, controller } = setup();
    api.goneAfterMs = 150;
    provider.createError = new Error("nope");
    await controller.start();
    pods.add(makePod("a"));
    await until(() => provider.creates.length >= 1);
    pods.update((p) => {
      p.metadata!.deletionTimestamp = new Date();
      p.metadata!.deletionGracePeriodSeconds = 30;
    }, "ns/a");
    await until(() => api.deletes.length === 1, "final delete");
    expect(provider.deletes).toHaveLength(0);
    await until(() => !pods.get("ns/a"), "pod gone");
    await controller.idle();
    expect(api.deletes).toHaveLength(1);
  });

  test("a pod deleted with nothing running skips the provider and is force-deleted at once", async () => {
    const { pods, api, provider, controller } = setup();
    provider.createError = new Error("nope");
    await controller.start();
    pods.add(makePod("a"));
    await until(() => provider.creates.length >= 1);
    pods.update((p) => {
      p.metadata!.deletionTimestamp = new Date();
      p.metadata!.deletionGracePeriodSeconds = 30;
    }, "ns/a");
    await until(() => api.deletes.length === 1, "force delete");
    expect(provider.deletes).toHaveLength(0);
  });

  test("a failing provider delete is a warning and retried; the final delete waits for it", async () => {
    const { pods, api, provider, controller, reasons } = setup();
    await controller.start();
    pods.add(makePod("a"));
    await until(() => pods.get("ns/a")?.status?.phase === "Running");
    provider.deleteError = new HttpishError(500, "release failed");
    pods.update((p) => {
      p.metadata!.deletionTimestamp = new Date();
      p.metadata!.deletionGracePeriodSeconds = 0;
    }, "ns/a");
    await until(() => provider.deletes.length >= 2, "retry");
    expect(api.deletes).toHaveLength(0);
    expect(await reasons()).toContain("ProviderDeleteFailed");
    provider.deleteError = undefined;
    await until(() => !pods.get("ns/a"), "pod gone after the release succeeded");
  });

  test("a pod that vanished from the cache is handed to the provider's delete", async () => {
    const { pods, provider, controller } = setup();
    await controller.start();
    pods.add(makePod("a"));
    await until(() => provider.table.size === 1);
    pods.remove("ns/a");
    await until(() => provider.deletes.length === 1, "DeletePod");
    expect(provider.deletes[0]!.metadata?.uid).toBe("uid-a");
    expect(provider.table.size).toBe(0);
  });

  test("force delete treats 404 and 409 as done", async () => {
    const { pods, api, controller } = setup();
    api.deleteError = new HttpishError(409);
    await controller.start();
    const p = makePod("a");
    pods.add(p);
    pods.update((x) => (x.metadata!.deletionTimestamp = new Date()), "ns/a");
    await until(() => api.deletes.length === 1);
    await controller.idle();
    expect(api.deletes).toHaveLength(1);
  });

  test("the dangling pass deletes provider pods the cache lacks before any worker runs", async () => {
    const { pods, provider, controller } = setup();
    provider.table.set("ns/ghost", makePod("ghost"));
    pods.store.set("ns/live", makePod("live"));
    await controller.start();
    expect(provider.deletes.map((p) => p.metadata?.name)).toEqual(["ghost"]);
  });

  test("a push for a replaced pod's old UID is not written onto the new pod", async () => {
    const { pods, api, provider, controller } = setup();
    await controller.start();
    provider.createError = new Error("hold");
    pods.add(makePod("a", {}, "new-uid"));
    await until(() => api.statusWrites.length >= 1);
    const before = api.statusWrites.length;
    provider.pushNow({ ...makePod("a", {}, "old-uid"), status: runningStatus() });
    await new Promise((r) => setTimeout(r, 30));
    expect(api.statusWrites.slice(before).some((w) => w.metadata?.uid === "old-uid")).toBe(false);
  });

  test("disabled pod events drop the success events but keep warnings", async () => {
    const { pods, provider, controller, reasons } = setup({ dropNormal: true });
    await controller.start();
    pods.add(makePod("ok"));
    await until(() => pods.get("ns/ok")?.status?.phase === "Running");
    provider.createError = new Error("bad template");
    pods.add(makePod("bad"));
    await until(() => provider.creates.length >= 2);
    await until(() => pods.get("ns/bad")?.status?.reason === "ProviderFailed");
    const r = await reasons();
    expect(r).not.toContain("ProviderCreateSuccess");
    expect(r).toContain("ProviderCreateFailed");
  });
});

describe("status writes", () => {
  test("a status write carries no managedFields", async () => {
    const { pods, api, provider, controller } = setup();
    await controller.start();
    const p = makePod("mf");
    p.metadata!.managedFields = [{ manager: "kubectl", operation: "Update" }];
    pods.add(p);
    await until(() => api.statusWrites.length >= 1);
    expect(api.statusWrites.every((w) => w.metadata?.managedFields === undefined)).toBe(true);
    provider.createError = new Error("x");
    pods.add(makePod("mf2"));
    await until(() => api.statusWrites.some((w) => w.metadata?.name === "mf2"));
    expect(api.statusWrites.every((w) => w.metadata?.managedFields === undefined)).toBe(true);
  });
});

describe("issue 7 case 4: long sandboxd outages", () => {
  test("a sync failing because sandboxd is down is never dropped after 20 attempts, and retries at least every 30 s", async () => {
    const clock = new FakeClock();
    const outage = Object.assign(new Error("sandboxd unreachable"), { outage: true });
    const { pods, provider, controller } = setup({ isOutage: (e) => (e as { outage?: boolean }).outage === true, clock });
    provider.createError = outage;
    await controller.start();
    pods.add(makePod("a"));
    // An hour of outage on the queue's clock: far past the 20th attempt (which the default policy drops).
    for (let t = 0; t < 3_600_000; t += 5_000) {
      await clock.tick(5_000);
      await new Promise((r) => setTimeout(r, 0));
    }
    expect(provider.creates.length).toBeGreaterThan(100); // 20 + (an hour / at most 30 s apart)
    expect(controller.syncQueue.stats().dropped).toBe(0);
    provider.createError = undefined;
    const creates = provider.creates.length;
    await clock.tick(OUTAGE_RETRY_MAX_MS);
    await until(() => pods.get("ns/a")?.status?.phase === "Running", "Running once sandboxd answers");
    expect(provider.creates.length).toBe(creates + 1);
  });

  test("a permanent error is still dropped after 20 attempts", async () => {
    const clock = new FakeClock();
    const { pods, provider, controller } = setup({ isOutage: () => false, clock });
    provider.createError = new Error("invalid pod");
    await controller.start();
    pods.add(makePod("a"));
    for (let t = 0; t < 7_200_000; t += 60_000) await clock.tick(60_000);
    expect(provider.creates).toHaveLength(20);
    expect(controller.syncQueue.stats().dropped).toBe(1);
  });
});

describe("issue 7 safety net: status pushes", () => {
  test("a push onto a Pod that is already Failed or Succeeded is never written", async () => {
    for (const phase of ["Failed", "Succeeded"]) {
      const { pods, api, provider, controller } = setup();
      await controller.start();
      pods.add(makePod("t"));
      await until(() => api.statusWrites.length === 1);
      pods.update((p) => (p.status = { phase, reason: "SandboxLeaseExpired" }), "ns/t");
      provider.pushNow({ ...structuredClone(provider.getPod("ns", "t")!), status: { ...runningStatus(), podIP: "10.9.9.9" } });
      await controller.idle();
      expect(api.statusWrites).toHaveLength(1);
      expect(pods.get("ns/t")?.status?.phase).toBe(phase);
    }
  });

  test("the status PUT carries the live resourceVersion, not the one the pushed object had", async () => {
    const { pods, api, provider, controller } = setup();
    await controller.start();
    pods.add(makePod("r"));
    await until(() => api.statusWrites.length === 1);
    const pushed = { ...structuredClone(provider.getPod("ns", "r")!), status: { ...runningStatus(), podIP: "10.1.1.1" } };
    pushed.metadata!.resourceVersion = "1"; // what the provider last saw
    // Someone else writes the Pod meanwhile: the live object moves on.
    const live = pods.update((p) => (p.metadata!.labels = { other: "writer" }), "ns/r");
    provider.pushNow(pushed);
    await until(() => api.statusWrites.length === 2, "second status write");
    expect(api.statusWrites[1]!.metadata?.resourceVersion).toBe(live.metadata!.resourceVersion!);
    expect(api.statusWrites[1]!.metadata?.resourceVersion).not.toBe("1");
  });
});
