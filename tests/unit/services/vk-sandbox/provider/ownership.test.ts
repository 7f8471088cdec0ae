import { describe, expect, test } from "bun:test";
import type { Claim, OwnerRef } from "#services/vk-sandbox/claims/schema.ts";
import { adoptable, authorityOf, authorizeRelease, ownerTargetOf, pluralOf } from "#services/vk-sandbox/provider/ownership.ts";
import type { OwnerLookup } from "#services/vk-sandbox/provider/types.ts";
import { bare, pod } from "./helpers.ts";

const row = (o: Partial<Claim> = {}): Claim => ({ id: "sb_1", token: "t", address: "", podUID: "", authority: "", claimedAt: 1, deadline: 0, ...o });
const ref: OwnerRef = { apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", name: "sb1", uid: "U" };

describe("owner resource names", () => {
  test.each([
    ["Sandbox", "sandboxes"],
    ["Policy", "policies"],
    ["Gateway", "gateways"],
    ["Batch", "batches"],
    ["Mesh", "meshes"],
    ["Quiz", "quizes"],
    ["Status", "statuses"],
    ["Deployment", "deployments"],
    ["Key", "keys"],
  ])("%s -> %s, never a naive +s", (kind, plural) => {
    expect(pluralOf(kind)).toBe(plural);
  });

  test("group and version come from apiVersion; no slash is the core group", () => {
    expect(ownerTargetOf(ref)).toMatchObject({ group: "agents.x-k8s.io", version: "v1beta1", resource: "sandboxes" });
    expect(ownerTargetOf({ ...ref, apiVersion: "v1", kind: "ReplicationController" })).toMatchObject({ group: "", version: "v1", resource: "replicationcontrollers" });
  });

  test("an empty kind or an unparsable apiVersion resolves to nothing", () => {
    expect(ownerTargetOf({ ...ref, kind: "" })).toBeUndefined();
    expect(ownerTargetOf({ ...ref, apiVersion: "" })).toBeUndefined();
    expect(ownerTargetOf({ ...ref, apiVersion: "a/b/c" })).toBeUndefined();
    expect(ownerTargetOf({ ...ref, apiVersion: "/v1" })).toBeUndefined();
  });
});

describe("adoption rule", () => {
  test("authority is the controller owner's UID, or a bare pod's own UID", () => {
    expect(authorityOf(pod({ owner: { name: "x", uid: "O" } }))).toBe("O");
    expect(authorityOf(bare({ uid: "P" }))).toBe("P");
  });

  test("the pod that holds the row adopts it whatever its owner", () => {
    expect(adoptable(row({ podUID: "P", authority: "X" }), pod({ uid: "P", owner: { name: "y", uid: "Y" } }))).toBe(true);
  });

  test("a pod with the recorded authority adopts; another does not", () => {
    expect(adoptable(row({ podUID: "P", authority: "X" }), pod({ uid: "Q", owner: { name: "x", uid: "X" } }))).toBe(true);
    expect(adoptable(row({ podUID: "P", authority: "X" }), pod({ uid: "Q", owner: { name: "y", uid: "Y" } }))).toBe(false);
  });

  test("while owner is set, the owner's UID is the expected authority, so a bare pod never adopts a preserved row", () => {
    const preserved = row({ podUID: "P", authority: "X", owner: { ...ref, uid: "O" } });
    expect(adoptable(preserved, pod({ uid: "Q", owner: { name: "o", uid: "O" } }))).toBe(true);
    expect(adoptable(preserved, pod({ uid: "Q", owner: { name: "x", uid: "X" } }))).toBe(false);
    expect(adoptable(preserved, bare({ uid: "Q" }))).toBe(false);
  });

  test("a legacy row without authority or owner is adopted by any same-key pod", () => {
    expect(adoptable(row({ podUID: "P" }), bare({ uid: "Q" }))).toBe(true);
  });
});

describe("delete authorization table", () => {
  const read = (l: OwnerLookup) => async () => l;
  test.each<[string, OwnerRef | undefined, OwnerLookup | "no reader", "release" | "preserve"]>([
    ["bare pod", undefined, { outcome: "error", error: new Error("unused") }, "release"],
    ["no dynamic client", ref, "no reader", "preserve"],
    ["404 naming the owner", ref, { outcome: "not-found", detailsName: "sb1" }, "release"],
    ["404 without details.name", ref, { outcome: "not-found" }, "preserve"],
    ["403", ref, { outcome: "error", error: new Error("forbidden") }, "preserve"],
    ["deleting", ref, { outcome: "found", object: { metadata: { uid: "U", deletionTimestamp: new Date() } } }, "release"],
    ["Ready SandboxExpired", ref, { outcome: "found", object: { metadata: { uid: "U" }, status: { conditions: [{ type: "Ready", reason: "SandboxExpired" }] } } }, "release"],
    ["Ready SandboxSuspended", ref, { outcome: "found", object: { metadata: { uid: "U" }, status: { conditions: [{ type: "Ready", reason: "SandboxSuspended" }] } } }, "preserve"],
    [
      "only the first Ready condition counts",
      ref,
      { outcome: "found", object: { metadata: { uid: "U" }, status: { conditions: [{ type: "Ready", reason: "Fine" }, { type: "Ready", reason: "SandboxExpired" }] } } },
      "preserve",
    ],
    ["uid rotated", ref, { outcome: "found", object: { metadata: { uid: "V" } } }, "release"],
    ["ref without uid, owner alive", { ...ref, uid: "" }, { outcome: "found", object: { metadata: { uid: "V" } } }, "preserve"],
    ["owner alive", ref, { outcome: "found", object: { metadata: { uid: "U" } } }, "preserve"],
  ])("%s -> %s", async (_what, r, lookup, want) => {
    const verdict = await authorizeRelease(r, "default", lookup === "no reader" ? undefined : read(lookup));
    expect(verdict.action).toBe(want);
  });

  test("a reader that throws is treated as an unreadable owner", async () => {
    const verdict = await authorizeRelease(ref, "default", async () => {
      throw new Error("boom");
    });
    expect(verdict.action).toBe("preserve");
  });
});
