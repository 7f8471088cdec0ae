import { describe, expect, test } from "bun:test";
import { LAST_APPLIED_META, LAST_APPLIED_STATUS, nodeStatusPatch, withHeartbeat } from "#services/vk-sandbox/node/status-patch.ts";

const status = { phase: "Running", capacity: { cpu: "4k" }, conditions: [{ type: "Ready", status: "True" }] };

describe("nodeStatusPatch", () => {
  test("it records what it applies in the two last-applied annotations", () => {
    const p = nodeStatusPatch({ labels: { a: "1" }, status }, { metadata: { name: "n" } }) as any;
    expect(JSON.parse(p.metadata.annotations[LAST_APPLIED_STATUS])).toEqual(status);
    expect(JSON.parse(p.metadata.annotations[LAST_APPLIED_META])).toEqual({ labels: { a: "1" } });
    expect(p.metadata.labels).toEqual({ a: "1" });
    expect(p.status.phase).toBe("Running");
  });

  test("a label applied last time and no longer wanted is removed; others' labels are not", () => {
    const live = {
      metadata: {
        name: "n",
        labels: { old: "x", keep: "1", theirs: "t" },
        annotations: { [LAST_APPLIED_META]: JSON.stringify({ labels: { old: "x", keep: "1" } }), [LAST_APPLIED_STATUS]: JSON.stringify(status) },
      },
      status,
    };
    const p = nodeStatusPatch({ labels: { keep: "1" }, status }, live) as any;
    expect(p.metadata.labels).toEqual({ old: null });
    expect(p.status).toBeUndefined();
  });

  test("issue 7 case 10: virtual-kubelet's own last-applied meta ({name, uid, labels}) never turns into name/uid deletions", () => {
    const live = {
      metadata: {
        name: "n",
        uid: "u-1",
        labels: { keep: "1", old: "x" },
        annotations: { [LAST_APPLIED_META]: JSON.stringify({ name: "n", uid: "u-1", labels: { keep: "1", old: "x" } }) },
      },
      status,
    };
    const p = nodeStatusPatch({ labels: { keep: "1" }, status }, live) as any;
    expect(Object.keys(p.metadata).sort()).toEqual(["annotations", "labels"]);
    expect(p.metadata.labels).toEqual({ old: null }); // its labels still count as applied by the node daemon
  });

  test("a mangled annotation is ignored rather than fatal", () => {
    const live = { metadata: { name: "n", annotations: { [LAST_APPLIED_STATUS]: "{not json" } } };
    expect(() => nodeStatusPatch({ labels: {}, status }, live)).not.toThrow();
  });

  test("withHeartbeat stamps every condition", () => {
    const now = new Date(5000);
    const s = withHeartbeat({ conditions: [{ type: "A", status: "" }, { type: "B", status: "" }] }, now);
    expect(s.conditions!.every((c) => c.lastHeartbeatTime === now)).toBe(true);
  });
});
