import { describe, expect, test } from "bun:test";
import type { Claim } from "#services/vk-sandbox/claims/schema.ts";
import { hostOf, runningStatus } from "#services/vk-sandbox/provider/status.ts";
import { parseTtl } from "#services/vk-sandbox/provider/pod-contract.ts";
import { pod } from "./helpers.ts";

const T0 = Date.UTC(2026, 6, 27, 2, 15, 0);
const claim: Claim = { id: "sb_1", token: "t", address: "10.0.0.5:7777", podUID: "u", authority: "a", claimedAt: T0, deadline: T0 + 1000 };

describe("synthetic Running status", () => {
  test("has the claim's host as host and pod IP, claimedAt as start time, three True conditions and one status per container", () => {
    const p = pod({ containers: [{ name: "a", image: "img-a" }, { name: "b", image: "img-b" }] });
    const s = runningStatus(p, claim);
    expect(s.phase).toBe("Running");
    expect(s.hostIP).toBe("10.0.0.5");
    expect(s.podIP).toBe("10.0.0.5");
    expect(s.podIPs).toEqual([{ ip: "10.0.0.5" }]);
    expect(s.startTime).toEqual(new Date(T0));
    expect(s.conditions?.map((c) => [c.type, c.status])).toEqual([
      ["Initialized", "True"],
      ["Ready", "True"],
      ["PodScheduled", "True"],
    ]);
    expect(s.containerStatuses).toEqual([
      { name: "a", image: "img-a", imageID: "sandboxd://sb_1", ready: true, restartCount: 0, state: { running: { startedAt: new Date(T0) } } },
      { name: "b", image: "img-b", imageID: "sandboxd://sb_1", ready: true, restartCount: 0, state: { running: { startedAt: new Date(T0) } } },
    ]);
  });

  test("is identical on every call, so repeated pushes are duplicates", () => {
    expect(runningStatus(pod(), claim)).toEqual(runningStatus(pod(), claim));
  });

  test("omits IPs when the claim has no address", () => {
    const s = runningStatus(pod(), { ...claim, address: "" });
    expect(s.podIP).toBeUndefined();
    expect(s.podIPs).toBeUndefined();
  });

  test.each([
    ["10.0.0.5:7777", "10.0.0.5"],
    ["10.0.0.5", "10.0.0.5"],
    ["[fd00::1]:7777", "fd00::1"],
    ["fd00::1", "fd00::1"],
    ["node-a.example.com:7777", "node-a.example.com"],
    ["https://node-a.example.com", "node-a.example.com"],
  ])("host of %s is %s", (addr, host) => {
    expect(hostOf(addr)).toBe(host);
  });
});

describe("ttl annotation", () => {
  const withTtl = (v?: string) => pod({ annotations: v === undefined ? {} : { "sandbox.cocoonstack.io/ttl-seconds": v } });
  test.each([
    [undefined, 86_400],
    ["", 86_400],
    ["0", undefined],
    ["-0", undefined],
    ["+30", 30],
    ["3600", 3600],
  ])("%p -> %p", (v, want) => {
    expect(parseTtl(withTtl(v))).toBe(want);
  });
  test.each(["-1", "abc", "1.5", "1e3", " 5", "99999999999999999999"])("%p is rejected", (v) => {
    expect(() => parseTtl(withTtl(v))).toThrow(/ttl-seconds/);
  });
});
