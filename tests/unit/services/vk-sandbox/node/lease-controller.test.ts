import { describe, expect, test } from "bun:test";
import { LeaseController } from "#services/vk-sandbox/node/lease-controller.ts";
import { FakeClock, formatMicroTime } from "#shared/clock/index.ts";
import { FakeKube, apiError, quietLog } from "./fake-kube.ts";

const INTERVAL = 10_000;

/** A started controller on its own fake clock; time has not moved yet. */
function started(kube: FakeKube, o: { ref?: boolean; gone?: () => boolean } = {}) {
  const clock = new FakeClock();
  const l = lease(kube, clock, o);
  l.start();
  return { l, clock };
}

function lease(kube: FakeKube, clock: FakeClock, o: { ref?: boolean; gone?: () => boolean } = {}) {
  return new LeaseController({
    clock,
    client: kube,
    nodeName: "n1",
    nodeRef: () => (o.ref === false ? undefined : { name: "n1", uid: "node-uid" }),
    nodeGone: o.gone,
    log: quietLog,
    renewIntervalMs: INTERVAL,
  });
}

describe("LeaseController", () => {
  test("the first round creates the Lease with holder, 40 s, renewTime and the Node ownerReference", async () => {
    const kube = new FakeKube();
    const { l, clock } = started(kube);
    await clock.tick(0);
    expect(l.renewCount).toBe(1);
    await l.stop();
    const create = kube.calls.find((c) => c.verb === "create")!;
    expect(create.opts).toEqual({ namespace: "kube-node-lease" });
    const body = create.body as any;
    expect(body.metadata).toMatchObject({ name: "n1", namespace: "kube-node-lease" });
    expect(body.metadata.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: "n1", uid: "node-uid" }]);
    expect(body.spec).toMatchObject({ holderIdentity: "n1", leaseDurationSeconds: 40 });
    expect(body.spec.renewTime).toBe(formatMicroTime(clock.now()));
  });

  test("later rounds PUT from the last returned object without a GET", async () => {
    const kube = new FakeKube();
    const { l, clock } = started(kube);
    await clock.tick(3 * INTERVAL);
    expect(l.renewCount).toBe(4);
    await l.stop();
    expect(kube.count("get")).toBe(1);
    expect(kube.count("update")).toBe(3);
  });

  test("an existing Lease without an owner gains it on update", async () => {
    const kube = new FakeKube();
    kube.objects.set("leases/n1", { metadata: { name: "n1", namespace: "kube-node-lease", resourceVersion: "1" }, spec: {} });
    const { l, clock } = started(kube);
    await clock.tick(0);
    expect(l.renewCount).toBe(1);
    await l.stop();
    const put = kube.calls.find((c) => c.verb === "update")!.body as any;
    expect(put.metadata.ownerReferences[0].uid).toBe("node-uid");
    expect(put.metadata.resourceVersion).toBe("1");
  });

  test("a failed PUT falls back to GET then PUT; a 409 re-reads", async () => {
    const kube = new FakeKube();
    const { l, clock } = started(kube);
    await clock.tick(0);
    expect(l.renewCount).toBe(1);
    kube.failures.update = [apiError(500, "InternalError"), apiError(409, "Conflict")];
    await clock.tick(INTERVAL);
    expect(l.renewCount).toBe(2);
    await l.stop();
    const verbs = kube.calls.map((c) => c.verb);
    // create, PUT fails (cached), GET, PUT 409, GET, PUT ok
    expect(verbs.slice(0, 7)).toEqual(["get", "create", "update", "get", "update", "get", "update"]);
  });

  test("it never creates the Lease without a registered Node, and backs off instead", async () => {
    const kube = new FakeKube();
    const { l, clock } = started(kube, { ref: false });
    // The backoff starts at 100 ms and doubles up to 7 s: it neither spins nor gives up.
    const getsAt: number[] = [];
    for (const step of [0, 99, 1, 200, 400, 800, 1600, 3200, 6400, 7000, 7000]) {
      await clock.tick(step);
      getsAt.push(kube.count("get"));
    }
    await l.stop();
    expect(getsAt).toEqual([1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(kube.count("create")).toBe(0);
    expect(l.renewCount).toBe(0);
  });

  test("renewal stops once the Node is gone", async () => {
    const kube = new FakeKube();
    let gone = false;
    const { l, clock } = started(kube, { gone: () => gone });
    await clock.tick(INTERVAL);
    expect(l.renewCount).toBe(2);
    gone = true;
    const n = kube.calls.length;
    await clock.tick(10 * INTERVAL);
    expect(kube.calls.length).toBe(n);
    await l.stop();
  });
});
