// Fakes for the pod controller's ports: an in-memory informer, a recording pod writer and a scripted provider.
// Each counts what it saw so tests wait on conditions, never on time (style item 14).
import type { V1Pod, V1PodStatus } from "@kubernetes/client-node";
import type { PodLifecycleProvider } from "#services/vk-sandbox/pods/lifecycle-provider.ts";
import type { PodSource, PodWriter } from "#services/vk-sandbox/pods/dependencies.ts";

export class HttpishError extends Error {
  constructor(
    readonly status: number,
    msg = `HTTP ${status}`,
  ) {
    super(msg);
  }
}

export const errors = {
  isNotFound: (e: unknown) => e instanceof HttpishError && e.status === 404,
  isConflict: (e: unknown) => e instanceof HttpishError && e.status === 409,
};

export const quietLog = { debug() {}, info() {}, warn() {}, error() {} };

export class FakePods implements PodSource {
  store = new Map<string, V1Pod>();
  private rv = 1;
  private adds: Array<(p: V1Pod) => void> = [];
  private updates: Array<(o: V1Pod, n: V1Pod) => void> = [];
  private deletes: Array<(p: V1Pod) => void> = [];
  get(key: string) {
    return this.store.get(key);
  }
  list() {
    return [...this.store.values()];
  }
  onAdd(fn: (p: V1Pod) => void) {
    this.adds.push(fn);
  }
  onUpdate(fn: (o: V1Pod, n: V1Pod) => void) {
    this.updates.push(fn);
  }
  onDelete(fn: (p: V1Pod) => void) {
    this.deletes.push(fn);
  }
  async startAndSync() {
    for (const p of this.store.values()) for (const f of this.adds) f(p);
  }
  add(pod: V1Pod) {
    const p = structuredClone(pod);
    p.metadata!.resourceVersion = String(this.rv++);
    this.store.set(key(p), p);
    for (const f of this.adds) f(p);
    return p;
  }
  update(mut: (p: V1Pod) => void, k: string) {
    const old = this.store.get(k)!;
    const p = structuredClone(old);
    mut(p);
    p.metadata!.resourceVersion = String(this.rv++);
    this.store.set(k, p);
    for (const f of this.updates) f(old, p);
    return p;
  }
  remove(k: string) {
    const p = this.store.get(k);
    if (!p) return;
    this.store.delete(k);
    for (const f of this.deletes) f(p);
  }
}

export class FakeWriter implements PodWriter {
  statusWrites: V1Pod[] = [];
  deletes: Array<{ namespace: string; name: string; uid: string }> = [];
  deleteError: unknown;
  /** While set, a status write waits for it before it lands (a slow apiserver). */
  statusGate: Promise<void> | undefined;
  constructor(private readonly pods: FakePods) {}
  async updateStatus(pod: V1Pod): Promise<V1Pod> {
    this.statusWrites.push(structuredClone(pod));
    if (this.statusGate) await this.statusGate;
    const k = key(pod);
    if (!this.pods.get(k)) throw new HttpishError(404);
    // Like the apiserver's status strategy: status, labels and annotations from the body, spec kept.
    return this.pods.update((p) => {
      p.status = pod.status;
      p.metadata!.annotations = pod.metadata?.annotations;
      p.metadata!.labels = pod.metadata?.labels;
    }, k);
  }
  /**
   * As the real apiserver: a grace-0 delete of a Pod bound to a node first updates it (grace period 0, seen by the
   * watch as MODIFIED), and the watch reports it gone only later. Undefined = removed at once.
   */
  goneAfterMs: number | undefined;
  async forceDelete(namespace: string, name: string, uid: string): Promise<void> {
    this.deletes.push({ namespace, name, uid });
    if (this.deleteError) throw this.deleteError;
    const k = `${namespace}/${name}`;
    const p = this.pods.get(k);
    if (!p) throw new HttpishError(404);
    if (p.metadata?.uid !== uid) throw new HttpishError(409);
    if (this.goneAfterMs === undefined) return void this.pods.remove(k);
    this.pods.update((x) => {
      x.metadata!.deletionTimestamp ??= new Date();
      x.metadata!.deletionGracePeriodSeconds = 0;
    }, k);
    setTimeout(() => this.pods.remove(k), this.goneAfterMs);
  }
}

/** A provider whose outcomes the test scripts; it pushes Running on create, like the real one. */
export class FakeProvider implements PodLifecycleProvider {
  table = new Map<string, V1Pod>();
  creates: V1Pod[] = [];
  updates: V1Pod[] = [];
  deletes: V1Pod[] = [];
  createError: unknown;
  deleteError: unknown;
  private push: (p: V1Pod) => void = () => {};
  async createPod(pod: V1Pod) {
    this.creates.push(pod);
    if (this.createError) throw this.createError;
    const stored = structuredClone(pod);
    stored.metadata!.annotations = { ...stored.metadata!.annotations, "sandbox.cocoonstack.io/claim-id": `sb_${pod.metadata!.name}` };
    this.table.set(key(pod), stored);
    this.push({ ...structuredClone(stored), status: runningStatus() });
  }
  async updatePod(pod: V1Pod) {
    this.updates.push(pod);
  }
  async deletePod(pod: V1Pod) {
    this.deletes.push(pod);
    if (this.deleteError) throw this.deleteError;
    this.table.delete(key(pod));
  }
  getPod(ns: string, name: string) {
    return this.table.get(`${ns}/${name}`);
  }
  getPods() {
    return [...this.table.values()];
  }
  getPodStatus(): V1PodStatus | undefined {
    return undefined;
  }
  notifyPods(push: (p: V1Pod) => void) {
    this.push = push;
  }
  pushNow(pod: V1Pod) {
    this.push(pod);
  }
}

export function runningStatus(): V1PodStatus {
  return {
    phase: "Running",
    podIP: "10.0.0.5",
    containerStatuses: [{ name: "c", image: "i", imageID: "sandboxd://x", ready: true, restartCount: 0, state: { running: {} } }],
  };
}

export function key(p: V1Pod): string {
  return `${p.metadata!.namespace}/${p.metadata!.name}`;
}

export function makePod(name: string, extra: Partial<V1Pod["spec"]> = {}, uid = `uid-${name}`): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "ns", uid, annotations: { "sandbox.cocoonstack.io/template": "t" } },
    spec: { nodeName: "vk", containers: [{ name: "c", image: "i" }], ...extra },
  };
}

export { until } from "#tests/support/wait.ts";
