// Pools that sleep (services/sandbox-apiserver/warmpool/sleep.ts): the annotations' precedence (pool, then its
// SandboxTemplate), sandboxd's own validation (egress, archive after idle), one policy per key, and what the PUT
// entries and each pool's sleep-status say.
import { describe, expect, test } from "bun:test";
import type { PoolKey } from "#shared/sandboxd/index.ts";
import { poolSets, resolvePools, type SandboxTemplate, type WarmPool } from "#services/sandbox-apiserver/warmpool/plan.ts";
import { ANN_ARCHIVE_AFTER, ANN_ARCHIVE_DELETE_AFTER, ANN_IDLE_HIBERNATE, planSleep, sleepOf } from "#services/sandbox-apiserver/warmpool/sleep.ts";

const pool = (name: string, annotations?: Record<string, string>, tplName = "t", namespace = "ns"): WarmPool => ({
  metadata: { name, namespace, ...(annotations ? { annotations } : {}) },
  spec: { replicas: 2, sandboxTemplateRef: { name: tplName } },
});
const tpl = (o: { image?: string; net?: string; meta?: Record<string, string>; pod?: Record<string, string> } = {}): SandboxTemplate => ({
  metadata: { name: "t", namespace: "ns", ...(o.meta ? { annotations: o.meta } : {}) },
  spec: {
    podTemplate: {
      metadata: { annotations: { ...(o.net ? { "sandbox.cocoonstack.io/net": o.net } : {}), ...o.pod } },
      spec: { containers: [{ image: o.image ?? "img" }] },
    },
  },
});
const KEY: PoolKey = { template: "img", net: "none", size: "small" };

describe("sleepOf", () => {
  test("no annotation, or only zeros: no policy", () => {
    expect(sleepOf(pool("a"), tpl(), KEY)).toEqual({ policy: undefined });
    expect(sleepOf(pool("a", { [ANN_IDLE_HIBERNATE]: "0" }), tpl(), KEY)).toEqual({ policy: undefined });
  });

  test("each setting from the pool first, else the template's metadata, else its pod template", () => {
    const t = tpl({ meta: { [ANN_IDLE_HIBERNATE]: "60", [ANN_ARCHIVE_AFTER]: "600" }, pod: { [ANN_ARCHIVE_AFTER]: "900", [ANN_ARCHIVE_DELETE_AFTER]: "86400" } });
    expect(sleepOf(pool("a", { [ANN_IDLE_HIBERNATE]: "30" }), t, KEY)).toEqual({
      policy: { idle_hibernate_seconds: 30, archive_after_seconds: 600, archive_delete_after_seconds: 86400 },
    });
  });

  test("refused as sandboxd refuses: not a whole number, over the bound, archive not after idle, idle on an egress pool", () => {
    const refused = (ann: Record<string, string>, key: PoolKey = KEY) => {
      const r = sleepOf(pool("a", ann), tpl(), key);
      return "refused" in r ? r.refused : "accepted";
    };
    expect(refused({ [ANN_IDLE_HIBERNATE]: "5m" })).toContain(`${ANN_IDLE_HIBERNATE}: "5m" is not a whole number of seconds`);
    expect(refused({ [ANN_IDLE_HIBERNATE]: "-1" })).toContain("is not a whole number");
    expect(refused({ [ANN_ARCHIVE_DELETE_AFTER]: "999999999999" })).toContain("between 0 and 315360000");
    expect(refused({ [ANN_IDLE_HIBERNATE]: "600", [ANN_ARCHIVE_AFTER]: "600" })).toBe(`${ANN_ARCHIVE_AFTER} must exceed ${ANN_IDLE_HIBERNATE}`);
    expect(refused({ [ANN_IDLE_HIBERNATE]: "60" }, { ...KEY, net: "egress" })).toContain("not allowed on an egress pool (net=egress)");
    // Archive retention alone is no idle time: an egress pool may carry it.
    expect(refused({ [ANN_ARCHIVE_DELETE_AFTER]: "60" }, { ...KEY, net: "egress" })).toBe("accepted");
  });
});

describe("planSleep and the pool sets", () => {
  test("the first pool of a key decides; a pool that agrees or says nothing shows the key's policy; one that differs is 'not applied'", () => {
    const pools = [
      pool("a", { [ANN_IDLE_HIBERNATE]: "300" }),
      pool("b"),
      pool("c", { [ANN_IDLE_HIBERNATE]: "300" }),
      pool("d", { [ANN_IDLE_HIBERNATE]: "30" }),
      pool("other", undefined, "t2"),
    ];
    const templates = (_ns: string, name: string) => (name === "t2" ? { ...tpl({ image: "img2" }), metadata: { name: "t2", namespace: "ns" } } : tpl());
    const r = resolvePools(pools, templates);
    const plan = planSleep(r, templates);
    expect([...plan.status.values()]).toEqual([
      "hibernate 300s",
      "hibernate 300s",
      "hibernate 300s",
      "not applied: the pool key img/none/small sleeps as ns/a sets it (hibernate 300s); sandboxd takes one policy per key",
      null,
    ]);
    expect(plan.problems.size).toBe(1);
    expect(poolSets(r, 1, plan.byKey)).toEqual([
      [
        { template: "img", net: "none", size: "small", warm: 8, idle_hibernate_seconds: 300 },
        { template: "img2", net: "none", size: "small", warm: 2 },
      ],
    ]);
  });

  test("an egress pool asking for an idle time warms without it and says why", () => {
    const templates = () => tpl({ net: "egress" });
    const r = resolvePools([pool("e", { [ANN_IDLE_HIBERNATE]: "60", [ANN_ARCHIVE_AFTER]: "120" })], templates);
    const plan = planSleep(r, templates);
    expect(plan.status.values().next().value).toStartWith("refused: sandbox.cocoonstack.io/idle-hibernate-seconds is not allowed on an egress pool");
    expect(poolSets(r, 1, plan.byKey)).toEqual([[{ template: "img", net: "egress", size: "small", warm: 2 }]]);
  });
});
