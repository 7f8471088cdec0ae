// A fork of `count: N` takes N of its namespace's max-sandboxes slots (issue 31): refused whole (429, Retry-After,
// the node never asked to fork, no child left) when fewer than N are free, admitted when N are. Real sandbox-e2b
// in-process on one simulated sandboxd node; the quota test of every start kind is namespace-isolation.test.ts case 9.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { KEY_A, startStack, type Stack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ pools: ["img:1/none/small=8"], keys: `${KEY_A} team-a max-sandboxes=4\n` });
}, 60_000);
afterAll(async () => {
  await s?.stop();
});

async function api(method: string, path: string, body?: unknown) {
  const r = await fetch(`${s.apiUrl}${path}`, { method, headers: { "x-api-key": KEY_A, "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await r.text();
  return { status: r.status, retryAfter: r.headers.get("retry-after"), json: text ? (JSON.parse(text) as unknown) : undefined };
}
const forkCalls = () => s.cluster.nodes[0]!.requests.filter((e) => e.route === "fork").length;
const held = () => s.cluster.nodes[0]!.claims().filter((c) => c.claimRef?.startsWith("team-a/")).length;
const listed = async () => ((await api("GET", "/v2/sandboxes")).json as Array<{ sandboxID: string }>).map((x) => x.sandboxID).sort();

describe("fork count against max-sandboxes", () => {
  test("with 3 of 4 slots free, count 4 and count 5 are 429 before the node forks; count 3 is admitted; then count 1 is 429", async () => {
    const parent = await api("POST", "/v2/sandboxes", { templateID: "img:1" });
    expect(parent.status).toBe(201);
    const id = (parent.json as { sandboxID: string }).sandboxID;
    const forksBefore = forkCalls();
    for (const count of [4, 5]) {
      const r = await api("POST", `/sandboxes/${id}/fork`, { count });
      expect([count, r.status]).toEqual([count, 429]);
      expect(r.json).toEqual({ code: 429, message: expect.stringContaining("max-sandboxes") });
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    // Refused whole: no fork reached the node, no child exists there or in the list.
    expect(forkCalls()).toBe(forksBefore);
    expect(held()).toBe(1);
    expect(await listed()).toEqual([id]);

    const fits = await api("POST", `/sandboxes/${id}/fork`, { count: 3 });
    expect(fits.status).toBe(201);
    expect(fits.json as unknown[]).toHaveLength(3);
    expect(held()).toBe(4);
    const full = await api("POST", `/sandboxes/${id}/fork`, { count: 1 });
    expect(full.status).toBe(429);
    expect(held()).toBe(4);
  }, 60_000);
});
