import { describe, expect, test } from "bun:test";
import { poolSets, resolvePools, spread, statusShares, type WarmPool } from "#services/sandbox-apiserver/warmpool/plan.ts";

const pool = (name: string, replicas: number | undefined, tpl: string | null = "t"): WarmPool => ({
  metadata: { name, namespace: "ns" },
  spec: { ...(replicas === undefined ? {} : { replicas }), ...(tpl === null ? {} : { sandboxTemplateRef: { name: tpl } }) },
});
const tpl = (image: string, net?: string) => ({
  metadata: { name: "t", namespace: "ns" },
  spec: { podTemplate: { ...(net ? { metadata: { annotations: { "sandbox.cocoonstack.io/net": net } } } : {}), spec: { containers: [{ image }] } } },
});

describe("warm-pool arithmetic", () => {
  test("spread: the first replicas mod N nodes get one more", () => {
    expect(spread(5, 3)).toEqual([2, 2, 1]);
    expect(spread(2, 3)).toEqual([1, 1, 0]);
    expect(spread(0, 2)).toEqual([0, 0]);
    expect(spread(4, 0)).toEqual([]);
  });
  test("replicas unset is 1, negative is 0; a missing ref or template is skipped", () => {
    const r = resolvePools([pool("a", undefined), pool("b", -3), pool("c", 2, null), pool("d", 2, "nope")], (_ns, name) => (name === "t" ? tpl("img") : undefined));
    expect(r.map((x) => ("replicas" in x ? x.replicas : x.skipped))).toEqual([1, 0, "spec.sandboxTemplateRef.name is required", "SandboxTemplate ns/nope not found"]);
  });
  test("pool sets sum targets by key, include zero targets, sort by template/net/size", () => {
    const r = resolvePools([pool("a", 3), pool("b", 1), pool("z", 0, "z")], (_ns, name) => (name === "z" ? { ...tpl("aaa"), metadata: { name: "z", namespace: "ns" } } : tpl("img")));
    expect(poolSets(r, 1)).toEqual([[{ template: "aaa", net: "none", size: "small", warm: 0 }, { template: "img", net: "none", size: "small", warm: 4 }]]);
  });
  test("status shares: proportional floor, leftovers in pool order, all to the first when targets sum to 0", () => {
    const r = resolvePools([pool("a", 3), pool("b", 1)], () => tpl("img"));
    const shares = statusShares(r, new Map([["img\u0000none\u0000small", 4]]));
    expect([...shares.values()]).toEqual([3, 1]);
    const odd = statusShares(r, new Map([["img\u0000none\u0000small", 3]]));
    expect([...odd.values()]).toEqual([3, 0]);
    const zero = statusShares(resolvePools([pool("a", 0), pool("b", 0)], () => tpl("img")), new Map([["img\u0000none\u0000small", 5]]));
    expect([...zero.values()]).toEqual([5, 0]);
  });
});
