import { describe, expect, test } from "bun:test";
import { createKeyOf, generatedName, ttlSecondsOf } from "#services/sandbox-apiserver/sandboxes/create.ts";
import type { Sandbox } from "#services/sandbox-apiserver/sandboxes/object.ts";

const sb = (o: { spec?: Record<string, unknown>; annotations?: Record<string, string> } = {}): Sandbox => ({
  apiVersion: "agents.x-k8s.io/v1beta1",
  kind: "Sandbox",
  metadata: { name: "x", ...(o.annotations ? { annotations: o.annotations } : {}) },
  spec: o.spec ?? {},
  status: {},
});
const NOW = Date.UTC(2026, 6, 6, 0, 0, 0);

describe("create inputs", () => {
  test("shutdownTime now+90.2 s rounds up to 91; a past or present time is a 400", () => {
    expect(ttlSecondsOf(sb({ spec: { shutdownTime: new Date(NOW + 90_200).toISOString() } }), NOW, "x")).toBe(91);
    expect(() => ttlSecondsOf(sb({ spec: { shutdownTime: new Date(NOW).toISOString() } }), NOW, "x")).toThrow("is not in the future");
  });
  test("the ttl-seconds annotation must be a non-negative integer; neither means the node default (0)", () => {
    expect(ttlSecondsOf(sb({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": "120" } }), NOW, "x")).toBe(120);
    expect(ttlSecondsOf(sb(), NOW, "x")).toBe(0);
    for (const v of ["-1", "1.5", "abc", ""]) {
      expect(() => ttlSecondsOf(sb({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": v } }), NOW, "x")).toThrow(`invalid sandbox.cocoonstack.io/ttl-seconds="${v}"`);
    }
  });
  test("the pool key: image, net from the object over the pod template, size by cpu then limits, memory independently", () => {
    const pt = (resources: object, podAnn?: object) => ({ podTemplate: { ...(podAnn ? { metadata: { annotations: podAnn } } : {}), spec: { containers: [{ image: "img", resources }] } } });
    expect(createKeyOf(sb({ spec: pt({}) }), "x")).toEqual({ template: "img", net: "none", size: "small" });
    expect(createKeyOf(sb({ spec: pt({ requests: { cpu: "2", memory: "1Gi" } }) }), "x").size).toBe("medium");
    expect(createKeyOf(sb({ spec: pt({ limits: { cpu: "5" } }) }), "x").size).toBe("large");
    expect(createKeyOf(sb({ spec: pt({ requests: { cpu: "0" }, limits: { cpu: "1500m" } }) }), "x").size).toBe("medium");
    expect(createKeyOf(sb({ spec: pt({ requests: { memory: "9Gi" } }) }), "x").size).toBe("large");
    expect(createKeyOf(sb({ spec: pt({ requests: { memory: "2Gi" } }) }), "x").size).toBe("small");
    expect(createKeyOf(sb({ spec: pt({}, { "sandbox.cocoonstack.io/net": "egress" }) }), "x").net).toBe("egress");
    expect(createKeyOf(sb({ spec: pt({}, { "sandbox.cocoonstack.io/net": "egress" }), annotations: { "sandbox.cocoonstack.io/net": "none" } }), "x").net).toBe("none");
    expect(() => createKeyOf(sb({ spec: pt({ requests: { cpu: "lots" } }) }), "x")).toThrow("requests.cpu");
    expect(() => createKeyOf(sb({ spec: pt({}), annotations: { "sandbox.cocoonstack.io/net": "bogus" } }), "x")).toThrow('invalid sandbox.cocoonstack.io/net="bogus": want one of none, egress');
  });
  test("generateName appends 5 characters and cuts the base to fit 63", () => {
    expect(generatedName("job-")).toMatch(/^job-[a-z0-9]{5}$/);
    expect(generatedName("x".repeat(70))).toHaveLength(63);
  });
});
