import { describe, expect, test } from "bun:test";
import type { V1Pod } from "@kubernetes/client-node";
import {
  effectivelyEqual,
  isTerminal,
  liveShowsPush,
  noContainerRunning,
  providerFieldsEqual,
  updateNeedsSync,
} from "#services/vk-sandbox/pods/compare.ts";
import { makePod, runningStatus } from "./fakes.ts";

const with_ = (mut: (p: V1Pod) => void, base = makePod("a")): V1Pod => {
  const p = structuredClone(base);
  mut(p);
  return p;
};

describe("pod comparisons", () => {
  test.each([
    ["containers", (p: V1Pod) => (p.spec!.containers[0]!.image = "other")],
    ["tolerations", (p: V1Pod) => (p.spec!.tolerations = [{ key: "k", operator: "Exists" }])],
    ["labels", (p: V1Pod) => (p.metadata!.labels = { a: "b" })],
    ["annotations", (p: V1Pod) => (p.metadata!.annotations = { x: "y" })],
    ["activeDeadlineSeconds", (p: V1Pod) => (p.spec!.activeDeadlineSeconds = 5)],
  ])("a change in %s reaches the provider", (_what, mut) => {
    const a = makePod("a");
    expect(providerFieldsEqual(a, with_(mut))).toBe(false);
    expect(updateNeedsSync(a, with_(mut))).toBe(true);
  });

  test("status and resourceVersion changes alone do not trigger a sync", () => {
    const a = makePod("a");
    const b = with_((p) => {
      p.status = runningStatus();
      p.metadata!.resourceVersion = "99";
    });
    expect(updateNeedsSync(a, b)).toBe(false);
    expect(effectivelyEqual(a, b)).toBe(true);
  });

  test("the deletion markers trigger a sync", () => {
    const a = makePod("a");
    expect(updateNeedsSync(a, with_((p) => (p.metadata!.deletionTimestamp = new Date(0))))).toBe(true);
    expect(updateNeedsSync(a, with_((p) => (p.metadata!.deletionGracePeriodSeconds = 30)))).toBe(true);
  });

  test("the live pod shows a push when phase, reason and every pushed label and annotation are there", () => {
    const pushed = with_((p) => {
      p.status = runningStatus();
      p.metadata!.annotations!["sandbox.cocoonstack.io/claim-id"] = "sb_1";
    });
    const live = with_((p) => {
      p.status = { ...runningStatus(), qosClass: "BestEffort" }; // server-filled fields are not drift
      p.metadata!.annotations = { ...pushed.metadata!.annotations, other: "x" };
    });
    expect(liveShowsPush(pushed, live)).toBe(true);
    expect(liveShowsPush(pushed, with_((p) => (p.status = { phase: "Pending" }), live))).toBe(false);
    expect(liveShowsPush(pushed, with_((p) => delete p.metadata!.annotations!["sandbox.cocoonstack.io/claim-id"], live))).toBe(false);
  });

  test("terminal phases and running containers", () => {
    expect(isTerminal(with_((p) => (p.status = { phase: "Failed" })))).toBe(true);
    expect(isTerminal(with_((p) => (p.status = { phase: "Succeeded" })))).toBe(true);
    expect(isTerminal(with_((p) => (p.status = { phase: "Running" })))).toBe(false);
    expect(noContainerRunning(makePod("a"))).toBe(true);
    expect(noContainerRunning(with_((p) => (p.status = runningStatus())))).toBe(false);
    expect(
      noContainerRunning(with_((p) => (p.status = { containerStatuses: [{ name: "c", image: "i", imageID: "", ready: false, restartCount: 0, state: { terminated: { exitCode: 1 } } }] }))),
    ).toBe(true);
  });
});
