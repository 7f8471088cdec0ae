// An in-memory stand-in for the slice of KubeClient the node loops call. It records every call and lets a test
// queue failures per verb. Merge semantics are not simulated: the integration tests prove those on a real apiserver.
import { KubeApiError } from "#shared/kube/errors.ts";
import type { ResourceRef } from "#shared/kube/resources.ts";

export interface Call {
  verb: "get" | "create" | "update" | "patch";
  resource: string;
  name?: string;
  body?: unknown;
  opts?: unknown;
}

export const apiError = (status: number, reason: string) => new KubeApiError({ status, reason, verb: "x", path: "/x" });

export class FakeKube {
  calls: Call[] = [];
  objects = new Map<string, any>();
  failures: Partial<Record<Call["verb"], KubeApiError[]>> = {};
  private uid = 0;
  private rv = 0;

  private key(res: ResourceRef, name: string) {
    return `${res.resource}/${name}`;
  }
  private fail(verb: Call["verb"]) {
    const e = this.failures[verb]?.shift();
    if (e) throw e;
  }
  count(verb: Call["verb"], resource?: string) {
    return this.calls.filter((c) => c.verb === verb && (!resource || c.resource === resource)).length;
  }

  async get<T>(res: ResourceRef, name: string, opts?: unknown): Promise<T> {
    this.calls.push({ verb: "get", resource: res.resource, name, opts });
    this.fail("get");
    const o = this.objects.get(this.key(res, name));
    if (!o) throw apiError(404, "NotFound");
    return structuredClone(o);
  }
  async create<T>(res: ResourceRef, obj: any, opts?: unknown): Promise<T> {
    this.calls.push({ verb: "create", resource: res.resource, name: obj.metadata?.name, body: structuredClone(obj), opts });
    this.fail("create");
    const stored = JSON.parse(JSON.stringify(obj));
    stored.metadata = { ...stored.metadata, uid: `uid-${++this.uid}`, resourceVersion: String(++this.rv) };
    this.objects.set(this.key(res, obj.metadata.name), stored);
    return structuredClone(stored);
  }
  async update<T>(res: ResourceRef, obj: any, opts?: unknown): Promise<T> {
    this.calls.push({ verb: "update", resource: res.resource, name: obj.metadata?.name, body: structuredClone(obj), opts });
    this.fail("update");
    const stored = JSON.parse(JSON.stringify(obj));
    stored.metadata = { ...stored.metadata, resourceVersion: String(++this.rv) };
    this.objects.set(this.key(res, obj.metadata.name), stored);
    return structuredClone(stored);
  }
  async patch<T>(res: ResourceRef, name: string, patch: any, opts?: unknown): Promise<T> {
    this.calls.push({ verb: "patch", resource: res.resource, name, body: structuredClone(patch), opts });
    this.fail("patch");
    const o = this.objects.get(this.key(res, name));
    if (!o) throw apiError(404, "NotFound");
    // Enough merging for the controller to see its own annotations come back.
    const ann = patch.metadata?.annotations;
    if (ann) o.metadata.annotations = { ...o.metadata.annotations, ...ann };
    o.metadata.resourceVersion = String(++this.rv);
    return structuredClone(o);
  }
}

export const quietLog = { info() {}, warn() {}, error() {}, debug() {} };

