// The pod controller's two writes against a real kube-apiserver, as the rbac.yaml ServiceAccount (issue 7 safety
// net): the final delete carries the UID precondition, so a same-name replacement is never deleted; the status PUT
// carries the resourceVersion it is given, so a stale one is refused instead of overwriting a newer object.
import { describe, expect, test } from "bun:test";
import type { V1Pod } from "@kubernetes/client-node";
import { isConflict } from "#shared/kube/errors.ts";
import { Pods } from "#shared/kube/resources.ts";
import { podWriter } from "#services/vk-sandbox/wire.ts";
import { useKubeFixture } from "./kube-fixture.ts";

const k = useKubeFixture();

const pod = (name: string): V1Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: { nodeName: "vk-writes", containers: [{ name: "c", image: "i" }], terminationGracePeriodSeconds: 0 },
});
const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e);

describe("pod writes on a real apiserver", () => {
  test("the force delete's UID precondition: the predecessor's delete never removes a same-name replacement", async () => {
    const w = podWriter(k.daemon);
    const first = await k.admin.create<V1Pod>(Pods, pod("same"), { namespace: "default" });
    await k.admin.delete(Pods, "same", { namespace: "default", gracePeriodSeconds: 0 });
    const second = await k.admin.create<V1Pod>(Pods, pod("same"), { namespace: "default" });
    const err = await failure(w.forceDelete("default", "same", first.metadata!.uid!));
    expect(isConflict(err)).toBe(true);
    const still = await k.admin.get<V1Pod>(Pods, "same", { namespace: "default" });
    expect(still.metadata?.uid).toBe(second.metadata!.uid!);
    await w.forceDelete("default", "same", second.metadata!.uid!);
  });

  test("the status PUT at a stale resourceVersion is refused (409), at the live one it lands", async () => {
    const w = podWriter(k.daemon);
    const created = await k.admin.create<V1Pod>(Pods, pod("rv"), { namespace: "default" });
    const moved = await k.admin.patch<V1Pod>(Pods, "rv", { metadata: { labels: { other: "writer" } } }, { namespace: "default", type: "merge" });
    const body = (rv: string): V1Pod => ({ ...moved, metadata: { ...moved.metadata, resourceVersion: rv }, status: { phase: "Running" } });
    expect(isConflict(await failure(w.updateStatus(body(created.metadata!.resourceVersion!))))).toBe(true);
    const written = await w.updateStatus(body(moved.metadata!.resourceVersion!));
    expect(written.status?.phase).toBe("Running");
  });
});
