// The delete-authorization owner read as wired to Kubernetes (wire.ts ownerReaderFor): a GET of the owner in the
// namespace it is handed (the Pod's), at the owner's group/version/resource, with a 404's details.name reported so
// the verdict table can tell "gone" from "no such resource". A fake kube client stands in for the apiserver and
// answers per namespace, as the real one does.
import { describe, expect, test } from "bun:test";
import type { KubeClient } from "#shared/kube/index.ts";
import { KubeApiError } from "#shared/kube/index.ts";
import { ownerReaderFor } from "#services/vk-sandbox/wire.ts";
import type { OwnerTarget } from "#services/vk-sandbox/provider/types.ts";

type Ref = { group: string; version: string; resource: string; namespaced?: boolean };

function fakeKube(objects: Record<string, object>) {
  const gets: Array<{ res: Ref; name: string; namespace: string | undefined }> = [];
  const kube = {
    async get<T>(res: Ref, name: string, o: { namespace?: string } = {}): Promise<T> {
      gets.push({ res, name, namespace: o.namespace });
      const obj = objects[`${o.namespace ?? ""}/${res.resource}/${name}`];
      if (!obj) {
        throw new KubeApiError({ status: 404, verb: "GET", path: `/${res.resource}/${name}`, reason: "NotFound", details: { name, kind: res.resource } });
      }
      return obj as T;
    },
  };
  return { kube: kube as unknown as KubeClient, gets };
}

const target: OwnerTarget = { apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", name: "sb1", uid: "u1", group: "agents.x-k8s.io", version: "v1beta1", resource: "sandboxes" };

describe("ownerReaderFor", () => {
  test("reads the owner in the namespace it is given, not another one holding a same-named object", async () => {
    const { kube, gets } = fakeKube({ "team/sandboxes/sb1": { metadata: { uid: "u1" } } });
    const read = ownerReaderFor(kube);
    expect(await read(target, "team")).toEqual({ outcome: "found", object: { metadata: { uid: "u1" } } });
    expect(await read(target, "default")).toEqual({ outcome: "not-found", detailsName: "sb1" });
    expect(gets.map((g) => [g.namespace, g.res.group, g.res.version, g.res.resource, g.res.namespaced, g.name])).toEqual([
      ["team", "agents.x-k8s.io", "v1beta1", "sandboxes", true, "sb1"],
      ["default", "agents.x-k8s.io", "v1beta1", "sandboxes", true, "sb1"],
    ]);
  });

  test("any other failure is an error outcome, never a throw", async () => {
    const kube = { get: async () => Promise.reject(new KubeApiError({ status: 403, verb: "GET", path: "/x", reason: "Forbidden" })) } as unknown as KubeClient;
    const r = await ownerReaderFor(kube)(target, "team");
    expect(r.outcome).toBe("error");
  });
});
