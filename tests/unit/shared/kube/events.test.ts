import { describe, expect, test } from "bun:test";
import type { CoreV1Event } from "@kubernetes/client-node";
import { EventRecorder, type EventSink } from "#shared/kube/events.ts";

class FakeSink implements EventSink {
  created: CoreV1Event[] = [];
  patches: Array<{ name: string; patch: Partial<CoreV1Event> }> = [];
  missing = new Set<string>();
  failCreate = false;
  async create(_ns: string, ev: CoreV1Event): Promise<unknown> {
    if (this.failCreate) throw new Error("apiserver down");
    this.created.push(ev);
    return ev;
  }
  async patch(_ns: string, name: string, patch: Partial<CoreV1Event>): Promise<unknown> {
    if (this.missing.has(name)) throw Object.assign(new Error("gone"), { notFound: true });
    this.patches.push({ name, patch });
    return {};
  }
}

const pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p1", namespace: "ns", uid: "u1", resourceVersion: "7" },
};

function recorder(sink: FakeSink, dropNormal = false): EventRecorder {
  return new EventRecorder({
    sink,
    component: "node-a/pod-controller",
    host: "node-a",
    dropNormal,
    isNotFound: (e) => (e as { notFound?: boolean }).notFound === true,
  });
}

describe("EventRecorder", () => {
  test("an event names the pod, its type, reason and the node's pod-controller as source", async () => {
    const sink = new FakeSink();
    const r = recorder(sink);
    r.warning(pod, "ProviderCreateFailed", "no template");
    await r.flush();
    expect(sink.created).toHaveLength(1);
    const ev = sink.created[0]!;
    expect(ev.type).toBe("Warning");
    expect(ev.reason).toBe("ProviderCreateFailed");
    expect(ev.message).toBe("no template");
    expect(ev.involvedObject).toMatchObject({ kind: "Pod", name: "p1", namespace: "ns", uid: "u1" });
    expect(ev.source).toEqual({ component: "node-a/pod-controller", host: "node-a" });
    expect(ev.metadata?.namespace).toBe("ns");
    expect(ev.metadata?.name?.startsWith("p1.")).toBe(true);
    expect(ev.count).toBe(1);
  });

  test("disabling pod events drops Normal ones and keeps Warnings", async () => {
    const sink = new FakeSink();
    const r = recorder(sink, true);
    r.normal(pod, "ProviderCreateSuccess", "ok");
    r.warning(pod, "ProviderCreateFailed", "429");
    await r.flush();
    expect(sink.created.map((e) => e.reason)).toEqual(["ProviderCreateFailed"]);
    expect(r.counts.dropped).toBe(1);
  });

  test("a repeated identical event patches the count instead of creating another", async () => {
    const sink = new FakeSink();
    const r = recorder(sink);
    for (let i = 0; i < 3; i++) {
      r.warning(pod, "ProviderCreateFailed", "429");
      await r.flush();
    }
    r.warning(pod, "ProviderCreateFailed", "different text");
    await r.flush();
    expect(sink.created).toHaveLength(2);
    expect(sink.patches.map((p) => p.patch.count)).toEqual([2, 3]);
    expect(sink.patches[0]!.name).toBe(sink.created[0]!.metadata!.name!);
  });

  test("identical events recorded back to back, before any write finished, still aggregate into one Event", async () => {
    const sink = new FakeSink();
    const r = recorder(sink);
    for (let i = 0; i < 4; i++) r.warning(pod, "ProviderCreateFailed", "429");
    await r.flush();
    expect(sink.created).toHaveLength(1);
    expect(sink.patches.map((p) => p.patch.count)).toEqual([2, 3, 4]);
  });

  test("an aggregated event that disappeared is created afresh", async () => {
    const sink = new FakeSink();
    const r = recorder(sink);
    r.warning(pod, "ProviderDeleteFailed", "500");
    await r.flush();
    sink.missing.add(sink.created[0]!.metadata!.name!);
    r.warning(pod, "ProviderDeleteFailed", "500");
    await r.flush();
    expect(sink.created).toHaveLength(2);
  });

  test("a failed write is counted and never thrown at the caller", async () => {
    const sink = new FakeSink();
    sink.failCreate = true;
    const r = recorder(sink);
    r.normal(pod, "ProviderCreateSuccess", "ok");
    await r.flush();
    expect(r.counts.failed).toBe(1);
  });
});
