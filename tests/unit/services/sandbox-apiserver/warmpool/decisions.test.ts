import { describe, expect, test } from "bun:test";
import pino from "pino";
import { FakeClock } from "#shared/clock/index.ts";
import { ANN_AUTOSCALE_STATUS, type Decision } from "#services/sandbox-apiserver/warmpool/autoscale.ts";
import { DecisionWriter, STATUS_REFRESH_MS } from "#services/sandbox-apiserver/warmpool/decisions.ts";
import type { WarmPool } from "#services/sandbox-apiserver/warmpool/plan.ts";

const pool = (annotations: Record<string, string> = {}): WarmPool => ({ metadata: { name: "p", namespace: "ns", annotations }, spec: { replicas: 1 } });
const decision = (target: number, claimsPerSecond = 1): Decision => ({ target, demand: target, claimsPerSecond, refillSeconds: 5, refillMeasured: true, min: 1, max: 64 });

/** A kube stub that records merge patches and can refuse them. */
function kube(refuse = false) {
  const patches: unknown[] = [];
  return {
    patches,
    patch: async (_res: unknown, _name: string, body: unknown) => {
      patches.push(body);
      if (refuse) throw new Error("403 forbidden");
      return {};
    },
  };
}

describe("DecisionWriter", () => {
  test("writes the annotation when the target changes, at most every 30 s for a drifting rate, and removes it when autoscaling stops", async () => {
    const clock = new FakeClock();
    const k = kube();
    const w = new DecisionWriter({ kube: k as never, clock, log: pino({ level: "silent" }) });
    const p = pool();
    await w.publish([p], new Map([[p, decision(5)]]), new Map());
    expect(k.patches).toEqual([{ metadata: { annotations: { [ANN_AUTOSCALE_STATUS]: expect.stringContaining('"target":5') } } }]);
    const written = pool({ [ANN_AUTOSCALE_STATUS]: JSON.stringify({ target: 5 }) });
    clock.advance(1_000);
    await w.publish([written], new Map([[written, decision(5, 1.3)]]), new Map());
    expect(k.patches).toHaveLength(1); // same target, 1 s later: not rewritten
    await w.publish([written], new Map([[written, decision(7)]]), new Map());
    expect(k.patches).toHaveLength(2); // a new target: at once
    clock.advance(STATUS_REFRESH_MS);
    await w.publish([written], new Map([[written, decision(5, 1.3)]]), new Map());
    expect(k.patches).toHaveLength(3);
    await w.publish([written], new Map(), new Map());
    expect(k.patches.at(-1)).toEqual({ metadata: { annotations: { [ANN_AUTOSCALE_STATUS]: null } } });
  });

  test("a refused write is retried every 30 s, not every pass", async () => {
    const clock = new FakeClock();
    const k = kube(true);
    const w = new DecisionWriter({ kube: k as never, clock, log: pino({ level: "silent" }) });
    const p = pool();
    await w.publish([p], new Map([[p, decision(5)]]), new Map());
    clock.advance(5_000);
    await w.publish([p], new Map([[p, decision(6)]]), new Map());
    expect(k.patches).toHaveLength(1);
    clock.advance(STATUS_REFRESH_MS);
    await w.publish([p], new Map([[p, decision(6)]]), new Map());
    expect(k.patches).toHaveLength(2);
  });
});
