// The Node Lease against a real kube-apiserver (scenario 15), as the rbac.yaml ServiceAccount.
import { describe, expect, test } from "bun:test";
import type { V1Lease } from "@kubernetes/client-node";
import { Leases } from "#shared/kube/resources.ts";
import { LeaseController, NodeController } from "#services/vk-sandbox/node/index.ts";
import { nodeSpecFromFlags, quietLog, useKubeFixture } from "./kube-fixture.ts";
import { waitFor } from "../../support/wait.ts";

const k = useKubeFixture();
const running = k.running;

async function nodeAndLease(name: string, renewIntervalMs?: number) {
  const node = new NodeController({ client: k.daemon, spec: nodeSpecFromFlags([`--node-name=${name}`]), log: quietLog });
  running.push(node);
  await node.ensure();
  const lease = new LeaseController({
    client: k.daemon,
    nodeName: name,
    nodeRef: () => node.nodeRef(),
    nodeGone: () => node.gone,
    log: quietLog,
    renewIntervalMs,
  });
  running.push(lease);
  lease.start();
  return { node, lease };
}

const getLease = (name: string) => k.admin.get<V1Lease>(Leases, name, { namespace: "kube-node-lease" });
// Compare micro-times as strings of equal shape: JS Dates would drop the microseconds.
const renewOf = (l: V1Lease) => String(l.spec?.renewTime);

describe("node Lease on a real apiserver", () => {
  test("scenario 15: holder, 40 s, a Node ownerReference and an advancing renewTime", async () => {
    const { node, lease } = await nodeAndLease("leased", 300);
    const first = await waitFor("a condition", () => getLease("leased").catch(() => undefined));
    expect(first.spec?.holderIdentity).toBe("leased");
    expect(first.spec?.leaseDurationSeconds).toBe(40);
    expect(first.metadata?.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: "leased", uid: node.nodeRef()!.uid }]);
    expect(renewOf(first)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    const seen = new Set<string>([renewOf(first)]);
    await waitFor("a condition", async () => {
      seen.add(renewOf(await getLease("leased")));
      return seen.size >= 3;
    }, 10_000, 50);
    expect(lease.renewCount).toBeGreaterThanOrEqual(3);
  }, 30_000);

  test("a Lease deleted by someone else is re-created on the next round, owner included", async () => {
    const { lease } = await nodeAndLease("recreated", 200);
    await waitFor("a condition", async () => lease.renewCount >= 1);
    await k.admin.delete(Leases, "recreated", { namespace: "kube-node-lease" });
    const again = await waitFor("a condition", () => getLease("recreated").catch(() => undefined), 10_000);
    expect(again.metadata?.ownerReferences?.[0]?.kind).toBe("Node");
  }, 30_000);

  test("scenario 15 at the real cadence: renewTime advances about every 10 s", async () => {
    const { lease } = await nodeAndLease("cadence");
    await waitFor("a condition", async () => lease.renewCount >= 1, 5_000);
    const t1 = Date.parse((await getLease("cadence")).spec!.renewTime as unknown as string);
    await waitFor("a condition", async () => lease.renewCount >= 2, 15_000);
    const t2 = Date.parse((await getLease("cadence")).spec!.renewTime as unknown as string);
    expect(t2 - t1).toBeGreaterThanOrEqual(9_500);
    expect(t2 - t1).toBeLessThanOrEqual(11_500);
  }, 40_000);
});
