// Server-side apply of a custom resource against a real kube-apiserver: two field managers share an object,
// managedFields records both, a conflicting apply without force is 409 naming the other manager, and force moves
// ownership. Also the status subresource: a status apply touches status only, a spec apply never touches status.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { KubeClient } from "#shared/kube/client.ts";
import { loadKubeConnection } from "#shared/kube/connection.ts";
import { isConflict, type KubeApiError } from "#shared/kube/errors.ts";
import { resourceForKind } from "#shared/kube/resources.ts";
import { startKubeApiserver, type TestCluster } from "#tests/kube/harness.ts";

const CRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: widgets.test.cocoonstack.io }
spec:
  group: test.cocoonstack.io
  scope: Namespaced
  names: { plural: widgets, singular: widget, kind: Widget, listKind: WidgetList }
  versions:
    - name: v1
      served: true
      storage: true
      subresources: { status: {} }
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                color: { type: string }
                size: { type: integer }
            status:
              type: object
              properties:
                phase: { type: string }
`;

type ManagedField = { manager: string; operation: string; subresource?: string; fieldsV1: { "f:spec"?: object; "f:status"?: object } };
type Widget = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; managedFields?: ManagedField[]; generation?: number };
  spec?: { color?: string; size?: number };
  status?: { phase?: string };
};

let cluster: TestCluster;
let client: KubeClient;
const Widgets = resourceForKind("test.cocoonstack.io/v1", "Widget", true)!;
// Each test applies its own Widget and builds its own starting point, so the tests hold in any order (--randomize).
const widgetNamed = (name: string) => (spec: Widget["spec"]): Widget => ({ apiVersion: "test.cocoonstack.io/v1", kind: "Widget", metadata: { name, namespace: "ssa" }, spec });

beforeAll(async () => {
  cluster = await startKubeApiserver();
  await cluster.apply(CRD);
  await cluster.createNamespace("ssa");
  client = new KubeClient(await loadKubeConnection({ KUBECONFIG: cluster.kubeconfig() }, { serviceAccountDir: "/nonexistent" }));
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
});

const owned = (w: Widget, manager: string, sub?: string) =>
  Object.keys(w.metadata.managedFields?.find((f) => f.manager === manager && f.operation === "Apply" && f.subresource === sub)?.fieldsV1[sub ? "f:status" : "f:spec"] ?? {}).sort();

test("two field managers each own what they applied, and managedFields shows both", async () => {
  const widget = widgetNamed("w-owners");
  expect(Widgets.resource).toBe("widgets");
  const a = await client.apply<Widget>(Widgets, widget({ color: "red" }), { fieldManager: "painter" });
  expect(a.spec).toEqual({ color: "red" });
  const b = await client.apply<Widget>(Widgets, widget({ size: 3 }), { fieldManager: "sizer" });
  expect(b.spec).toEqual({ color: "red", size: 3 });
  expect(owned(b, "painter")).toEqual(["f:color"]);
  expect(owned(b, "sizer")).toEqual(["f:size"]);
  // Re-applying a manager's own intent without a field it used to set removes that field (it owned it alone).
  const c = await client.apply<Widget>(Widgets, widget({}), { fieldManager: "sizer" });
  expect(c.spec).toEqual({ color: "red" });
  await client.apply<Widget>(Widgets, widget({ size: 3 }), { fieldManager: "sizer" });
});

test("an apply that changes another manager's field is a 409 conflict naming it; force takes the field over", async () => {
  const widget = widgetNamed("w-conflict");
  await client.apply<Widget>(Widgets, widget({ color: "red" }), { fieldManager: "painter" });
  await client.apply<Widget>(Widgets, widget({ size: 3 }), { fieldManager: "sizer" });
  const e = (await client.apply(Widgets, widget({ color: "blue" }), { fieldManager: "sizer" }).then(
    () => undefined,
    (x) => x,
  )) as KubeApiError;
  expect(isConflict(e)).toBe(true);
  expect(e.verb).toBe("apply");
  expect(JSON.stringify(e.details?.causes)).toContain("painter");
  expect(JSON.stringify(e.details?.causes)).toContain(".spec.color");
  const still = await client.get<Widget>(Widgets, "w-conflict", { namespace: "ssa" });
  expect(still.spec?.color).toBe("red");

  const forced = await client.apply<Widget>(Widgets, widget({ color: "blue", size: 3 }), { fieldManager: "sizer", force: true });
  expect(forced.spec).toEqual({ color: "blue", size: 3 });
  expect(owned(forced, "sizer")).toEqual(["f:color", "f:size"]);
  expect(owned(forced, "painter")).toEqual([]);
});

test("applying the same value another manager set shares ownership without a conflict", async () => {
  const widget = widgetNamed("w-shared");
  await client.apply<Widget>(Widgets, widget({ color: "red" }), { fieldManager: "painter" });
  await client.apply<Widget>(Widgets, widget({ color: "blue", size: 3 }), { fieldManager: "sizer", force: true });
  const shared = await client.apply<Widget>(Widgets, widget({ color: "blue" }), { fieldManager: "painter" });
  expect(owned(shared, "painter")).toEqual(["f:color"]);
  expect(owned(shared, "sizer")).toEqual(["f:color", "f:size"]);
});

test("the status subresource: a status apply sets status only; a spec apply leaves status alone", async () => {
  const widget = widgetNamed("w-status");
  await client.apply<Widget>(Widgets, widget({ color: "blue", size: 3 }), { fieldManager: "sizer" });
  const s = await client.apply<Widget>(
    Widgets,
    { apiVersion: "test.cocoonstack.io/v1", kind: "Widget", metadata: { name: "w-status", namespace: "ssa" }, status: { phase: "Ready" } },
    { fieldManager: "controller", subresource: "status" },
  );
  expect(s.status).toEqual({ phase: "Ready" });
  expect(s.spec).toEqual({ color: "blue", size: 3 });
  expect(owned(s, "controller", "status")).toEqual(["f:phase"]);
  // Status sent to the main resource is ignored by the apiserver (status is a subresource here).
  const t = await client.apply<Widget>(Widgets, { ...widget({ size: 4 }), status: { phase: "Broken" } }, { fieldManager: "sizer", force: true });
  expect(t.status).toEqual({ phase: "Ready" });
  const p = await client.patch<Widget>(Widgets, "w-status", { status: { phase: "Done" } }, { namespace: "ssa", type: "merge", subresource: "status" });
  expect(p.status?.phase).toBe("Done");
  expect(p.spec?.size).toBe(4);
});
