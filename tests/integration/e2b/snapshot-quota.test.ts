// Issue 27 item 3: snapshots are inside the namespace quotas. The finding: with max-sandboxes=1 and
// creates-per-second=1, one key took 60 full-VM checkpoints in 0.8 s, and they outlived the sandbox. Here the real
// sandbox-e2b (its own process) over the simulator, driven by the stock e2b SDK: a burst of concurrent snapshots
// stops at the line's max-snapshots (the SDK's RateLimitError, the node holds exactly that many), the count still
// holds once the sandbox is gone (a new sandbox cannot snapshot until one is deleted), and the default
// snapshots-per-second flag refuses a second snapshot within its interval with Retry-After (the SDK retries it).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RateLimitError, Sandbox } from "e2b";
import { e2bProcessFixture, spawnE2b, type Child, type E2bProcessFixture } from "./process.ts";
import { e2bListeners } from "../relay/hostile.ts";

const ROOT = "root-snapq";
const DOMAIN = "snapq.test";
const KEY_COUNT = "e2b_snapq_count_0000000000000000000000000";
const KEY_RATE = "e2b_snapq_rate_00000000000000000000000000";
let fixture: E2bProcessFixture;
let child: Child;
let api = "";
let metricsUrl = "";

beforeAll(async () => {
  fixture = await e2bProcessFixture({
    rootToken: ROOT,
    apiKey: KEY_COUNT,
    domain: DOMAIN,
    // The finding's line, plus max-snapshots=2; snapshots-per-second=0 lifts the default rate for this namespace.
    keys: `${KEY_COUNT} team-count max-sandboxes=1 creates-per-second=1 max-snapshots=2 snapshots-per-second=0\n${KEY_RATE} team-rate\n`,
  });
  child = spawnE2b([...fixture.args, "--metrics-bind-address=127.0.0.1:0", "--e2b-default-snapshots-per-second=0.5"]);
  ({ api, metricsUrl } = await e2bListeners(child));
}, 60_000);

afterAll(async () => {
  await child?.stop();
  await fixture?.stop();
}, 30_000);

const opts = (apiKey: string) => ({ apiKey, apiUrl: api, domain: DOMAIN, requestTimeoutMs: 10_000 });
const checkpointsOf = (ns: string) => [...fixture.cluster.nodes[0]!.node.checkpoints.values()].filter((c) => c.name?.startsWith(`${ns}/`));

describe("snapshots count in the namespace quotas (sandbox-e2b, stock SDK)", () => {
  test("20 concurrent snapshots under max-snapshots=2: two are taken, the rest are RateLimitError naming max-snapshots", async () => {
    const sbx = await Sandbox.create("img", opts(KEY_COUNT));
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => sbx.createSnapshot({ name: `burst-${i}` })));
    const taken = outcomes.filter((o) => o.status === "fulfilled");
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
    expect(taken).toHaveLength(2);
    expect(refused).toHaveLength(18);
    for (const r of refused) {
      expect(r.reason).toBeInstanceOf(RateLimitError);
      expect(String((r.reason as Error).message)).toContain("snapshots kept (max-snapshots)");
    }
    expect(checkpointsOf("team-count")).toHaveLength(2);

    // They outlive the sandbox, and so does the count: a new sandbox of the namespace cannot snapshot.
    await sbx.kill();
    fixture.cluster.nodes[0]!.refillNow();
    const next = await Sandbox.create("img", opts(KEY_COUNT));
    const raw = await fetch(`${api}/sandboxes/${next.sandboxId}/snapshots`, { method: "POST", headers: { "x-api-key": KEY_COUNT, "content-type": "application/json" }, body: "{}" });
    expect(raw.status).toBe(429);
    expect(raw.headers.get("retry-after")).toBe("5");
    expect(await raw.json()).toEqual({ code: 429, message: "namespace quota exceeded: 2 of 2 snapshots kept (max-snapshots); delete one (Sandbox.deleteSnapshot) or retry later" });
    expect(checkpointsOf("team-count")).toHaveLength(2);

    // A delete frees a slot.
    const first = (taken[0] as PromiseFulfilledResult<{ snapshotId: string }>).value.snapshotId;
    expect(await Sandbox.deleteSnapshot(first, opts(KEY_COUNT))).toBe(true);
    await next.createSnapshot({ name: "after-delete" });
    expect(checkpointsOf("team-count")).toHaveLength(2);
    await next.kill();

    const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
    // 19 refusals at least: the SDK retries a 429 itself before it raises RateLimitError.
    expect(Number(/e2b_quota_rejections_total\{namespace="team-count",quota="max-snapshots"\} (\d+)/.exec(metrics)?.[1])).toBeGreaterThanOrEqual(19);
    expect(metrics).toContain('e2b_namespace_quota_max_snapshots{namespace="team-count"} 2');
  }, 60_000);

  test("--e2b-default-snapshots-per-second=0.5: a second snapshot within 2 s is 429 with Retry-After 2, before any node call", async () => {
    fixture.cluster.nodes[0]!.refillNow();
    const sbx = await Sandbox.create("img", opts(KEY_RATE));
    await sbx.createSnapshot();
    const before = fixture.cluster.nodes[0]!.requests.filter((e) => e.route === "checkpoint").length;
    const raw = await fetch(`${api}/sandboxes/${sbx.sandboxId}/snapshots`, { method: "POST", headers: { "x-api-key": KEY_RATE, "content-type": "application/json" }, body: "{}" });
    expect(raw.status).toBe(429);
    expect(raw.headers.get("retry-after")).toBe("2");
    expect(((await raw.json()) as { message: string }).message).toBe("namespace quota exceeded: more than 0.5 snapshots per second (snapshots-per-second); retry later");
    expect(fixture.cluster.nodes[0]!.requests.filter((e) => e.route === "checkpoint").length).toBe(before);
    expect(checkpointsOf("team-rate")).toHaveLength(1);
    // The SDK honours the 429: it retries after its backoff, and the rate lets the next one through 2 s on.
    await sbx.createSnapshot();
    expect(checkpointsOf("team-rate")).toHaveLength(2);
    await sbx.kill();
  }, 60_000);
});
