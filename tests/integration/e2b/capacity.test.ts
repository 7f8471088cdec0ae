// The capacity answer on the e2b surface (issue 21.2), through the stock JS SDK: a pool run dry answers 503 with the
// nodes considered, the warm/target counts seen and a Retry-After computed from the refill time the surface
// measured from its own fleet polls; the SDK's error carries that text. Node names and the image never show.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { KEY_A, sdkOpts, startStack, type Stack } from "./harness.ts";
import { until } from "#tests/support/wait.ts";

const REFILL_MS = 1_500;
let s: Stack;

beforeAll(async () => {
  s = await startStack({ pools: ["img:1/none/small=2"] });
  s.cluster.nodes[0]!.setProvisionLatency(REFILL_MS);
});
afterAll(() => s.stop());

/** The pool's warm count as the surface's fleet view last saw it. */
const seenWarm = () => s.mesh.fleet.nodes()[0]?.pools.find((p) => p.template === "img:1")?.warm ?? -1;
const seenEntries = () => s.mesh.fleet.nodes()[0]?.entries.length ?? 0;
const post = () =>
  fetch(`${s.apiUrl}/v2/sandboxes`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": KEY_A }, body: JSON.stringify({ templateID: "base" }) });

describe("e2b capacity answer", () => {
  test("a dry pool: 503 with counts and a Retry-After from the measured refill; the SDK's error shows the text", async () => {
    // Two claims, then the node refills both (~1.5 s): the surface's polls see the claims and the refills.
    const first = await Promise.all([Sandbox.create("base", sdkOpts(s)), Sandbox.create("base", sdkOpts(s))]);
    const key = { template: "img:1", net: "none", size: "small" } as const;
    await until(() => seenWarm() === 2 && s.mesh.fleet.demand.read(key).refillSamples >= 2, "the surface to see both refills", 15_000, 20);
    // Keep it dry from here: provisions fail, the two warm VMs are claimed.
    s.cluster.nodes[0]!.provisionFails("img:1/none/small", true);
    const second = await Promise.all([Sandbox.create("base", sdkOpts(s)), Sandbox.create("base", sdkOpts(s))]);
    await until(() => seenWarm() === 0 && seenEntries() === 4, "the surface to see the pool dry", 15_000, 20);

    const rateBefore = s.mesh.fleet.demand.read(key).claimsPerSecond;
    const r = await post();
    expect(r.status).toBe(503);
    // The miss is demand: a pool run dry is sized by what was asked, not by what it served.
    expect(s.mesh.fleet.demand.read(key).claimsPerSecond).toBeGreaterThan(rateBefore);
    const body = (await r.json()) as { code: number; message: string };
    expect(body.code).toBe(503);
    expect(body.message).toMatch(
      /^no warm sandbox available for template "base" \(net="none" size="small"\): 1 node\(s\) considered, warm\/target per fresh node \[0\/2\]; a node refills one in about \d+\.\ds \(measured\); retry after \d+s$/,
    );
    const measured = Number(/about (\d+\.\d)s/.exec(body.message)![1]);
    // The simulator's provision latency, seen through 200 ms polls: each end of a sample is stamped by the first poll
    // after it, so a sample is off by at most one poll interval either way.
    expect(measured).toBeGreaterThanOrEqual((REFILL_MS - 200) / 1000);
    expect(measured).toBeLessThan(REFILL_MS / 1000 + 2.5);
    expect(r.headers.get("retry-after")).toBe(String(Math.ceil(measured)));
    expect(body.message).not.toContain("img:1");
    expect(body.message).not.toContain("127.0.0.1");

    const err = (await Sandbox.create("base", sdkOpts(s)).catch((e: unknown) => e)) as Error;
    expect(err.constructor.name).toBe("ServiceBusyError");
    expect(err.message).toContain('no warm sandbox available for template "base" (net="none" size="small"): 1 node(s) considered');
    expect(err.message).toContain("(measured); retry after");

    s.cluster.nodes[0]!.provisionFails("img:1/none/small", false);
    await Promise.all([...first, ...second].map((x) => x.kill()));
  }, 60_000);
});
