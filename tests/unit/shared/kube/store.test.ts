import { expect, test } from "bun:test";
import { objectKey as keyOf, podKey, splitKey } from "#shared/kube/keys.ts";
import { Store } from "#shared/kube/store.ts";

type Pod = { metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> }; spec?: { nodeName?: string } };
const pod = (name: string, node: string, ns = "default", rv = "1"): Pod => ({ metadata: { name, namespace: ns, resourceVersion: rv }, spec: { nodeName: node } });

test("keys are ns/name for namespaced objects and name for cluster-scoped ones", () => {
  expect(keyOf(pod("a", "n"))).toBe("default/a");
  expect(keyOf({ metadata: { name: "node-1" } })).toBe("node-1");
});

test("indexes follow updates and deletes", () => {
  const s = new Store<Pod>({ byNode: (p) => (p.spec?.nodeName ? [p.spec.nodeName] : []) });
  s.set(pod("a", "n1"));
  s.set(pod("b", "n1"));
  s.set(pod("c", "n2"));
  expect(s.byIndex("byNode", "n1").map(keyOf).sort()).toEqual(["default/a", "default/b"]);
  const old = s.set(pod("a", "n2", "default", "2"));
  expect(old?.metadata.resourceVersion).toBe("1");
  expect(s.byIndex("byNode", "n1").map(keyOf)).toEqual(["default/b"]);
  expect(s.byIndex("byNode", "n2").map(keyOf).sort()).toEqual(["default/a", "default/c"]);
  s.delete("default/b");
  expect(s.byIndex("byNode", "n1")).toEqual([]);
  expect(s.size).toBe(2);
  expect(() => s.byIndex("nope", "x")).toThrow(/nope/);
});

test("podKey is always <namespace>/<name> (no namespace = default); splitKey inverts both key forms", () => {
  expect(podKey({ metadata: { namespace: "ns", name: "p" } })).toBe("ns/p");
  expect(podKey({ metadata: { name: "p" } })).toBe("default/p");
  expect(splitKey("ns/p")).toEqual(["ns", "p"]);
  expect(splitKey(podKey({ metadata: { name: "p" } }))).toEqual(["default", "p"]);
  expect(splitKey("node-1")).toEqual(["", "node-1"]);
});
