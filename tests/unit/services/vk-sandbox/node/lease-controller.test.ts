import { describe, expect, test } from "bun:test";
import { LeaseController, microTime } from "../../../../../services/vk-sandbox/node/lease-controller.ts";
import { FakeKube, apiError, quietLog, until } from "./fake-kube.ts";

function lease(kube: FakeKube, o: { ref?: boolean; gone?: () => boolean; interval?: number } = {}) {
  return new LeaseController({
    client: kube,
    nodeName: "n1",
    nodeRef: () => (o.ref === false ? undefined : { name: "n1", uid: "node-uid" }),
    nodeGone: o.gone,
    log: quietLog,
    renewIntervalMs: o.interval ?? 5,
  });
}

describe("LeaseController", () => {
  test("microTime has six fractional digits", () => {
    expect(microTime(new Date("2026-01-02T03:04:05.678Z"))).toBe("2026-01-02T03:04:05.678000Z");
  });

  test("the first round creates the Lease with holder, 40 s, renewTime and the Node ownerReference", async () => {
    const kube = new FakeKube();
    const l = lease(kube, { interval: 60_000 });
    l.start();
    await until(() => l.renewCount >= 1);
    await l.stop();
    const create = kube.calls.find((c) => c.verb === "create")!;
    expect(create.opts).toEqual({ namespace: "kube-node-lease" });
    const body = create.body as any;
    expect(body.metadata).toMatchObject({ name: "n1", namespace: "kube-node-lease" });
    expect(body.metadata.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: "n1", uid: "node-uid" }]);
    expect(body.spec).toMatchObject({ holderIdentity: "n1", leaseDurationSeconds: 40 });
    expect(body.spec.renewTime).toMatch(/\.\d{6}Z$/);
  });

  test("later rounds PUT from the last returned object without a GET", async () => {
    const kube = new FakeKube();
    const l = lease(kube);
    l.start();
    await until(() => l.renewCount >= 4);
    await l.stop();
    expect(kube.count("get")).toBe(1);
    expect(kube.count("update")).toBeGreaterThanOrEqual(3);
  });

  test("an existing Lease without an owner gains it on update", async () => {
    const kube = new FakeKube();
    kube.objects.set("leases/n1", { metadata: { name: "n1", namespace: "kube-node-lease", resourceVersion: "1" }, spec: {} });
    const l = lease(kube, { interval: 60_000 });
    l.start();
    await until(() => l.renewCount >= 1);
    await l.stop();
    const put = kube.calls.find((c) => c.verb === "update")!.body as any;
    expect(put.metadata.ownerReferences[0].uid).toBe("node-uid");
    expect(put.metadata.resourceVersion).toBe("1");
  });

  test("a failed PUT falls back to GET then PUT; a 409 re-reads", async () => {
    const kube = new FakeKube();
    const l = lease(kube);
    l.start();
    await until(() => l.renewCount >= 1);
    kube.failures.update = [apiError(500, "InternalError"), apiError(409, "Conflict")];
    await until(() => l.renewCount >= 3);
    await l.stop();
    const verbs = kube.calls.map((c) => c.verb);
    // create, PUT fails (cached), GET, PUT 409, GET, PUT ok
    expect(verbs.slice(0, 7)).toEqual(["get", "create", "update", "get", "update", "get", "update"]);
  });

  test("it never creates the Lease without a registered Node, and backs off instead", async () => {
    const kube = new FakeKube();
    const l = lease(kube, { ref: false });
    l.start();
    await Bun.sleep(350);
    await l.stop();
    expect(kube.count("create")).toBe(0);
    // 100 + 200 ms of backoff fits about three GETs in 350 ms: it neither spins nor gives up.
    expect(kube.count("get")).toBeGreaterThanOrEqual(2);
    expect(kube.count("get")).toBeLessThanOrEqual(4);
  });

  test("renewal stops once the Node is gone", async () => {
    const kube = new FakeKube();
    let gone = false;
    const l = lease(kube, { gone: () => gone });
    l.start();
    await until(() => l.renewCount >= 2);
    gone = true;
    await Bun.sleep(20);
    const n = kube.calls.length;
    await Bun.sleep(30);
    expect(kube.calls.length).toBe(n);
    await l.stop();
  });
});
