// spec.operatingMode on PATCH and PUT (services/sandbox-apiserver/sandboxes/operating-mode.ts): what each patch type
// may say, what is refused (and how kubectl will print it), and the subresource authorization.
import { describe, expect, test } from "bun:test";
import { sandboxFromEntry } from "#services/sandbox-apiserver/sandboxes/object.ts";
import { authorizeModeChange, requestedMode } from "#services/sandbox-apiserver/sandboxes/operating-mode.ts";
import { ApiError } from "#services/sandbox-apiserver/api/status.ts";

const current = sandboxFromEntry({ name: "ns/x", id: "sb_1", phase: "Running", template: "img:1" }, "n1");
const ask = (type: string | undefined, body: unknown) => requestedMode(type, JSON.stringify(body), current, "x");
const refusal = (f: () => unknown): { code: number; message: string; causes?: unknown } => {
  try {
    f();
  } catch (e) {
    if (e instanceof ApiError) return { code: e.code, message: e.message, ...(e.causes ? { causes: e.causes } : {}) };
    throw e;
  }
  throw new Error("not refused");
};

describe("requestedMode", () => {
  test("merge and strategic patches set it; null is back to Running; a patch without it asks nothing", () => {
    expect(ask("application/merge-patch+json", { spec: { operatingMode: "Suspended" } })).toBe("Suspended");
    expect(ask("application/strategic-merge-patch+json; charset=utf-8", { spec: { operatingMode: "Running" } })).toBe("Running");
    expect(ask("application/merge-patch+json", { spec: { operatingMode: null } })).toBe("Running");
    expect(ask("application/merge-patch+json", { metadata: { name: "x", resourceVersion: "1" } })).toBeUndefined();
  });

  test("JSON patch: replace/add set it, remove is Running, test is allowed, any other path is refused", () => {
    expect(ask("application/json-patch+json", [{ op: "test", path: "/metadata/name", value: "x" }, { op: "replace", path: "/spec/operatingMode", value: "Suspended" }])).toBe("Suspended");
    expect(ask("application/json-patch+json", [{ op: "remove", path: "/spec/operatingMode" }])).toBe("Running");
    expect(refusal(() => ask("application/json-patch+json", [{ op: "add", path: "/metadata/labels/a", value: "b" }])).message).toContain("metadata.labels.a: Forbidden");
  });

  test("PUT of the object as read, with the mode changed, is the mode; a changed label is 422 with its field as the cause", () => {
    expect(ask(undefined, { ...current, spec: { operatingMode: "Suspended" } })).toBe("Suspended");
    const r = refusal(() => ask(undefined, { ...current, metadata: { ...current.metadata, labels: { ...current.metadata.labels, extra: "1" } } }));
    expect(r.code).toBe(422);
    expect(r.causes).toEqual([{ reason: "FieldValueForbidden", field: "metadata.labels", message: "Forbidden: only spec.operatingMode may change on an existing sandbox (the rest is its node's)" }]);
    // The same labels in another key order are the same labels.
    const reordered = Object.fromEntries(Object.entries(current.metadata.labels ?? {}).reverse());
    expect(ask(undefined, { ...current, metadata: { ...current.metadata, labels: reordered }, spec: { operatingMode: "Running" } })).toBe("Running");
  });

  test("refused: another spec field, an unknown mode, a renamed object, an apply patch, bad JSON", () => {
    expect(refusal(() => ask("application/merge-patch+json", { spec: { podTemplate: {} } })).message).toContain("spec.podTemplate: Forbidden");
    const bad = refusal(() => ask("application/merge-patch+json", { spec: { operatingMode: "Paused" } }));
    expect([bad.code, bad.message]).toEqual([422, 'Sandbox.agents.x-k8s.io "x" is invalid: spec.operatingMode: Unsupported value: "Paused": supported values: "Running", "Suspended"']);
    expect(refusal(() => ask("application/merge-patch+json", { metadata: { name: "y" } })).message).toContain("metadata.name: Invalid value");
    expect(refusal(() => ask("application/apply-patch+yaml", {})).code).toBe(415);
    expect(refusal(() => requestedMode("application/merge-patch+json", "{", current, "x")).code).toBe(400);
  });
});

describe("authorizeModeChange", () => {
  const user = { name: "u", groups: ["system:authenticated"] };
  test("the subresource the mode means is reviewed; masters pass; no reviewer, a denial or a failed review is 403", async () => {
    const asked: string[] = [];
    const review = async (_c: unknown, ns: string, name: string, sub: "pause" | "resume") => (asked.push(`${ns}/${name}/${sub}`), sub === "resume");
    await authorizeModeChange(review, user, "ns", "x", "Running");
    const denied = await authorizeModeChange(review, user, "ns", "x", "Suspended").catch((e: ApiError) => e);
    expect((denied as ApiError).code).toBe(403);
    expect((denied as ApiError).message).toContain('spec.operatingMode Suspended needs create on sandboxes/pause in namespace "ns"');
    expect(asked).toEqual(["ns/x/resume", "ns/x/pause"]);
    await authorizeModeChange(undefined, { name: "admin", groups: ["system:masters"] }, "ns", "x", "Suspended");
    expect(((await authorizeModeChange(undefined, user, "ns", "x", "Suspended").catch((e: ApiError) => e)) as ApiError).code).toBe(403);
    const broken = async () => {
      throw new Error("authz down");
    };
    expect(((await authorizeModeChange(broken, user, "ns", "x", "Running").catch((e: ApiError) => e)) as ApiError).message).toContain("authz down");
  });
});
