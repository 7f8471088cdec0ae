import { expect, test } from "bun:test";
import { Leases, Nodes, Pods, pluralize, resourceForKind, resourcePath } from "#shared/kube/resources.ts";

test.each([
  ["Pod", "pods"],
  ["Class", "classes"],
  ["Box", "boxes"],
  ["Quiz", "quizes"],
  ["Batch", "batches"],
  ["Mesh", "meshes"],
  ["Policy", "policies"],
  ["Gateway", "gateways"],
  ["NodeInventory", "nodeinventories"],
  ["SandboxTemplate", "sandboxtemplates"],
])("the plural of %s is %s", (kind, plural) => {
  expect(pluralize(kind)).toBe(plural);
});

test("resourceForKind splits group and version; an apiVersion without a slash is the core group", () => {
  expect(resourceForKind("v1", "ConfigMap", true)).toEqual({ group: "", version: "v1", resource: "configmaps", namespaced: true });
  expect(resourceForKind("sandbox.cocoonstack.io/v1alpha1", "NodeInventory", false)).toEqual({
    group: "sandbox.cocoonstack.io",
    version: "v1alpha1",
    resource: "nodeinventories",
    namespaced: false,
  });
});

test.each([
  ["v1", ""],
  ["", "Pod"],
  ["a/b/c", "Pod"],
  ["/v1", "Pod"],
  ["apps/", "Deployment"],
])("resourceForKind(%p, %p) is undefined", (apiVersion, kind) => {
  expect(resourceForKind(apiVersion, kind, true)).toBeUndefined();
});

test("paths: core vs group, namespaced vs cluster-scoped, subresources, escaped names", () => {
  expect(resourcePath(Pods, { namespace: "ns" })).toBe("/api/v1/namespaces/ns/pods");
  expect(resourcePath(Pods)).toBe("/api/v1/pods");
  expect(resourcePath(Pods, { namespace: "ns", name: "p", subresource: "status" })).toBe("/api/v1/namespaces/ns/pods/p/status");
  expect(resourcePath(Nodes, { namespace: "ignored", name: "n1" })).toBe("/api/v1/nodes/n1");
  expect(resourcePath(Leases, { namespace: "kube-node-lease", name: "a b" })).toBe("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/a%20b");
  expect(() => resourcePath(Pods, { namespace: "ns", name: "" })).toThrow();
});
