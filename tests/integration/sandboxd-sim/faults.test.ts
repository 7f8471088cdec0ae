// The fault knobs of sandboxd.md §7: latency, hang, fail, reset before/after commit, listFails modes.
import { describe, expect, test } from "bun:test";
import type { SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { KEY, ROOT, call, claim, simsPerTest } from "./helpers.ts";

const sim = simsPerTest({ pools: [`${KEY}=2`] });

const postClaim = (s: SandboxdSim, body: object, signal?: AbortSignal) =>
  fetch(`${s.url}/v1/claim`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ template: "base:24.04", ...body }), signal });

describe("sandboxd-sim fault knobs", () => {
  test("fail answers the next N requests of a route with the injected status and body, then the route works again", async () => {
    const s = await sim();
    s.fail("claim", 503, undefined, 2);
    expect((await claim(s)).status).toBe(503);
    expect((await claim(s)).json).toEqual({ error: "injected 503" });
    expect((await claim(s)).status).toBe(200);
    s.fail("info", 502, "<html>bad gateway</html>");
    const html = await call(s, "GET", "/v1/info");
    expect([html.status, html.text, html.headers.get("content-type")]).toEqual([502, "<html>bad gateway</html>", "text/plain; charset=utf-8"]);
    s.fail("claim", 200, ""); // an empty 200: nothing handed out
    expect(await claim(s)).toMatchObject({ status: 200, text: "" });
    s.fail("*", 500, { error: "everything" });
    expect((await call(s, "GET", "/v1/peers")).json).toEqual({ error: "everything" });
    expect(s.claims()).toHaveLength(1); // injected failures never touch state
  });

  test("latency delays a route in wall time; hang never answers and commits nothing", async () => {
    const s = await sim();
    s.latency("info", 150);
    const t = performance.now();
    expect((await call(s, "GET", "/v1/info")).status).toBe(200);
    expect(performance.now() - t).toBeGreaterThanOrEqual(140);
    expect((await call(s, "GET", "/v1/peers")).status).toBe(200); // other routes unaffected
    s.latency("info", null);

    s.hang("claim");
    await expect(postClaim(s, {}, AbortSignal.timeout(200))).rejects.toThrow();
    expect(s.claims()).toHaveLength(0);
    expect(s.requests.at(-1)!.outcome).toBe("hang");
    expect((await claim(s)).status).toBe(200); // count defaults to 1
  });

  test("fail with pathIncludes hits only the requests for that path (one sandbox), others pass", async () => {
    const s = await sim();
    const a = (await claim(s)).json as { id: string; token: string };
    const b = (await claim(s)).json as { id: string; token: string };
    s.fail("release", 500, { error: "refused" }, 5, a.id);
    const rel = (id: string) => fetch(`${s.url}/v1/sandboxes/${id}/release`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` } });
    expect((await rel(b.id)).status).toBe(204);
    expect((await rel(a.id)).status).toBe(500);
    expect(s.claims().map((c) => c.id)).toEqual([a.id]);
  });

  test("hang after commit: the claim exists and is listed, and the caller never gets an answer", async () => {
    const s = await sim();
    s.hang("claim", 1, "after");
    await expect(postClaim(s, { claim_ref: "ns/held" }, AbortSignal.timeout(300))).rejects.toThrow();
    expect((await call(s, "GET", "/v1/sandboxes?claim_ref=ns/held")).json.sandboxes).toHaveLength(1);
    expect(s.requests.find((e) => e.route === "claim")!.outcome).toBe("hang");
    expect((await claim(s)).status).toBe(200); // one use only
  });

  test("reset before commit drops the connection with nothing handed out", async () => {
    const s = await sim();
    s.reset("claim", "before");
    await expect(postClaim(s, { claim_ref: "ns/lost" })).rejects.toThrow();
    expect((await call(s, "GET", "/v1/sandboxes?claim_ref=ns/lost")).json.sandboxes).toEqual([]);
  });

  test("reset after commit is the ambiguous case: the reply is lost but the claim exists and is listed by claim_ref", async () => {
    const s = await sim();
    s.reset("claim", "after");
    await expect(postClaim(s, { claim_ref: "ns/ambiguous" })).rejects.toThrow();
    const rows = (await call(s, "GET", "/v1/sandboxes?claim_ref=ns/ambiguous")).json.sandboxes;
    expect(rows).toHaveLength(1);
    expect(s.requests.find((e) => e.route === "claim")!.outcome).toBe("reset");
    s.reset("release", "after");
    await expect(fetch(`${s.url}/v1/sandboxes/${rows[0].id}/release`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` } })).rejects.toThrow();
    expect(s.claims()).toHaveLength(0); // the release was committed
  });

  test("listFails makes only GET /v1/sandboxes fail: 500, truncated, oversize, hang; false restores it", async () => {
    const s = await sim();
    await claim(s);
    s.listFails("500");
    expect((await call(s, "GET", "/v1/sandboxes")).status).toBe(500);
    expect((await call(s, "GET", "/v1/info")).status).toBe(200);
    s.listFails("truncated");
    const cut = await call(s, "GET", "/v1/sandboxes");
    expect(cut.status).toBe(200);
    expect(() => JSON.parse(cut.text)).toThrow();
    s.listFails("oversize");
    const big = await call(s, "GET", "/v1/sandboxes");
    expect(big.text.length).toBeGreaterThan(16 * 1024 * 1024);
    s.listFails("hang");
    await expect(fetch(`${s.url}/v1/sandboxes`, { headers: { authorization: `Bearer ${ROOT}` }, signal: AbortSignal.timeout(200) })).rejects.toThrow();
    s.listFails(false);
    expect((await call(s, "GET", "/v1/sandboxes")).json.sandboxes).toHaveLength(1);
  });

  test("clearFaults removes queued faults, latencies and list failures", async () => {
    const s = await sim();
    s.fail("claim", 500, undefined, Infinity);
    s.listFails("500");
    s.clearFaults();
    expect((await claim(s)).status).toBe(200);
    expect((await call(s, "GET", "/v1/sandboxes")).status).toBe(200);
  });
});
