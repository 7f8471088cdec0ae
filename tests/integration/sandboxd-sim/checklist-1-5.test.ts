// sandboxd.md §7 "Simulator requirements", items 1–5: one named test per item, against the real HTTP listener with
// raw fetch. Items 6–13 are in checklist-6-13.test.ts.
import { describe, expect, test } from "bun:test";
import {
  CHECKPOINT_ID_RE,
  Checkpoint,
  ClaimReply,
  ForkReply,
  Info,
  ListReply,
  PromoteReply,
  RenewReply,
  SANDBOX_ID_RE,
  SANDBOX_TOKEN_RE,
  SandboxDetail,
  Stats,
} from "#shared/sandboxd/schemas.ts";
import { KEY, ROOT, call, claim, rawRequest, simsPerTest, upgradeHead } from "./helpers.ts";

const sim = simsPerTest({ pools: [`${KEY}=2`] });

describe("sandboxd.md §7 simulator requirements (1–5)", () => {
  test("1. serves every route the control plane calls with the exact paths, methods, statuses and member names", async () => {
    const s = await sim();
    const c = await claim(s, { claim_ref: "ns/a", metadata: { app: "x" } });
    expect(c.status).toBe(200);
    const reply = ClaimReply.parse(c.json);
    expect(Object.keys(c.json).sort()).toEqual(["deadline", "id", "net_route", "owner_addr", "token"]);
    expect(reply.owner_addr).toBe(s.addr);
    const id = reply.id;

    const detail = await call(s, "GET", `/v1/sandboxes/${id}`);
    expect(detail.status).toBe(200);
    expect(SandboxDetail.parse(detail.json).token).toBe(reply.token);
    expect(detail.json.tenant).toBeUndefined(); // root's claims carry no tenant

    const list = await call(s, "GET", "/v1/sandboxes");
    expect(ListReply.parse(list.json).sandboxes.map((r) => r.id)).toEqual([id]);
    expect(list.json.sandboxes[0].token).toBeUndefined();
    expect(list.json.sandboxes[0].archived).toBeUndefined();

    expect(Stats.parse((await call(s, "GET", `/v1/sandboxes/${id}/stats`)).json).mem_used_measured).toBe(true);
    const owner = await call(s, "GET", `/v1/sandboxes/${id}/owner`, { token: reply.token });
    expect([owner.status, owner.json]).toEqual([200, { owner_addr: s.addr }]);
    const renew = await call(s, "POST", `/v1/sandboxes/${id}/renew`, { body: { ttl_seconds: 60 } });
    expect(renew.status).toBe(200);
    RenewReply.parse(renew.json);
    expect((await call(s, "POST", `/v1/sandboxes/${id}/hibernate`)).status).toBe(204);
    expect((await call(s, "POST", `/v1/sandboxes/${id}/wake`)).status).toBe(204);
    const fork = await call(s, "POST", `/v1/sandboxes/${id}/fork`, { body: { count: 2, claim_ref_prefix: "ns/" } });
    expect(ForkReply.parse(fork.json).children).toHaveLength(2);
    const promote = await call(s, "POST", `/v1/sandboxes/${id}/promote`, { body: { template: "myproj:v1" } });
    expect(PromoteReply.parse(promote.json).key).toEqual({ template: "myproj:v1", net: "none", size: "small" });
    const ck = await call(s, "POST", `/v1/sandboxes/${id}/checkpoint`, { body: { name: "ns/x" } });
    const checkpoint = Checkpoint.parse(ck.json.checkpoint);
    expect((await call(s, "GET", "/v1/checkpoints")).json.checkpoints[0].id).toBe(checkpoint.id);
    const branch = await call(s, "POST", `/v1/checkpoints/${checkpoint.id}/claim`, { body: {} });
    expect(ClaimReply.parse(branch.json).from_checkpoint).toBe(checkpoint.id);
    expect((await call(s, "DELETE", `/v1/checkpoints/${checkpoint.id}`)).status).toBe(204);
    expect((await call(s, "PUT", "/v1/templates/labels?template=myproj:v1&net=none&size=small", { body: { labels: { a: "b" } } })).status).toBe(204);
    expect((await call(s, "DELETE", "/v1/templates?template=myproj:v1&net=none&size=small")).status).toBe(204);
    expect((await call(s, "PUT", `/v1/sandboxes/${id}/instance-metadata`, { body: { k: "v" } })).status).toBe(204);
    Info.parse((await call(s, "GET", "/v1/info")).json);
    Info.parse((await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 2 }] } })).json);
    expect((await call(s, "POST", "/v1/drain")).json.draining).toBe(true);
    expect((await call(s, "DELETE", "/v1/drain")).json.draining).toBeUndefined();
    expect((await call(s, "GET", "/v1/peers")).json).toEqual({ peers: [] });
    const metrics = await call(s, "GET", "/metrics");
    expect(metrics.text).toContain("sandboxd_claimed 4");
    expect(await call(s, "GET", "/healthz", { token: null })).toMatchObject({ status: 200, text: "ok" });
    expect((await call(s, "GET", `/v1/sandboxes/${id}/ports/49983`)).status).toBe(426);
    expect((await call(s, "POST", `/v1/sandboxes/${id}/release`)).status).toBe(204);
    expect((await call(s, "POST", `/v1/sandboxes/${id}/release`)).status).toBe(404);
  });

  test("2. applies the §2.2 guards verbatim: 401 vs 403 vs 404, identical 404s, root elevation, body tokens, open node", async () => {
    const s = await sim({ tenants: { acme: { token: "acme-tok", max_claims: 0 } } });
    expect(await claim(s, {}, null)).toMatchObject({ status: 401, json: { error: "invalid api token" } });
    expect(await claim(s, {}, "nope")).toMatchObject({ status: 401, json: { error: "invalid api token" } });
    expect(await call(s, "GET", "/v1/info", { token: "acme-tok" })).toMatchObject({ status: 403, json: { error: "operator token required" } });
    expect((await call(s, "GET", "/v1/info", { token: "nope" })).status).toBe(401);

    const t = (await claim(s, {}, "acme-tok")).json;
    expect((await call(s, "GET", `/v1/sandboxes/${t.id}`)).json.tenant).toBe("acme");
    const missing = await call(s, "POST", `/v1/sandboxes/${t.id}/renew`, { token: null });
    expect(missing).toMatchObject({ status: 401, json: { error: "missing bearer token" } });
    const tenantTok = await call(s, "POST", `/v1/sandboxes/${t.id}/renew`, { token: "acme-tok" });
    const unknownId = await call(s, "POST", "/v1/sandboxes/sb_0000000000000000/renew", { token: t.token });
    const wrongTok = await call(s, "POST", `/v1/sandboxes/${t.id}/renew`, { token: "f".repeat(32) });
    for (const r of [tenantTok, unknownId, wrongTok]) expect([r.status, r.text]).toEqual([404, '{"error":"unknown sandbox"}']);
    expect((await call(s, "POST", `/v1/sandboxes/${t.id}/renew`, { token: t.token })).status).toBe(200);
    expect((await call(s, "POST", `/v1/sandboxes/${t.id}/hibernate`)).status).toBe(204); // root, by id
    expect(await call(s, "GET", `/v1/sandboxes/${t.id}/owner`)).toMatchObject({ status: 404, json: { error: "not owned here" } });

    // Body-token verbs: a tenant must send the sandbox token; root with an empty body token is the operator.
    expect((await call(s, "POST", `/v1/sandboxes/${t.id}/fork`, { token: "acme-tok", body: { count: 1 } })).status).toBe(404);
    expect((await call(s, "POST", `/v1/sandboxes/${t.id}/fork`, { token: "acme-tok", body: { count: 1, token: t.token } })).status).toBe(200);
    expect((await call(s, "POST", `/v1/sandboxes/${t.id}/checkpoint`, { body: { token: "" } })).status).toBe(200);
    expect((await call(s, "POST", `/v1/sandboxes/${t.id}/fork`, { token: "nope", body: { count: 1 } })).status).toBe(401);

    // Open node: node-level and root-only surfaces need nothing; sandbox verbs still need the sandbox's token.
    const open = await sim({ rootToken: undefined });
    const o = (await claim(open, {}, null)).json;
    expect(SANDBOX_ID_RE.test(o.id)).toBe(true);
    const d = await call(open, "GET", `/v1/sandboxes/${o.id}`, { token: null });
    expect([d.status, d.json.token]).toEqual([200, undefined]);
    expect((await call(open, "POST", `/v1/sandboxes/${o.id}/release`, { token: null })).status).toBe(401);
    expect((await call(open, "POST", `/v1/sandboxes/${o.id}/release`, { token: ROOT })).status).toBe(404);
    expect((await call(open, "POST", `/v1/sandboxes/${o.id}/release`, { token: o.token })).status).toBe(204);
  });

  test("3. answers handled errors as {\"error\":…} JSON and router misses (404, 405) in plain text", async () => {
    const s = await sim();
    const handled = await call(s, "POST", "/v1/sandboxes/sb_0000000000000000/release");
    expect(handled.headers.get("content-type")).toContain("application/json");
    expect(handled.json).toEqual({ error: "unknown sandbox" });
    const miss = await call(s, "GET", "/v1/nothing-here");
    expect([miss.status, miss.text]).toEqual([404, "404 page not found\n"]);
    expect(miss.headers.get("content-type")).toContain("text/plain");
    const method = await call(s, "DELETE", "/v1/claim");
    expect([method.status, method.text, method.headers.get("allow")]).toEqual([405, "Method Not Allowed\n", "POST"]);
    expect((await call(s, "PUT", "/v1/drain")).headers.get("allow")).toBe("POST, DELETE");
  });

  test("4. enforces the 1 MiB body cap and decodes claim bodies leniently but PUT /v1/pools strictly", async () => {
    const s = await sim();
    const big = JSON.stringify({ template: "base:24.04", pad: "x".repeat(1024 * 1024) });
    expect(await call(s, "POST", "/v1/claim", { raw: big })).toMatchObject({ status: 400, json: { error: "invalid request body" } });
    expect(await call(s, "POST", "/v1/claim", { raw: "{not json" })).toMatchObject({ status: 400, json: { error: "invalid request body" } });
    expect((await claim(s, { someday_field: { nested: true } })).status).toBe(200);
    expect((await claim(s, { template: "" })).json.error).toStartWith("invalid pool key: ");
    expect((await claim(s, { size: "huge" })).json.error).toStartWith("invalid pool key: ");
    const strict = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 1, surprise: 1 }] } });
    expect([strict.status, strict.json.error]).toEqual([400, 'invalid request body: unknown field "surprise"']);
    const top = await call(s, "PUT", "/v1/pools", { body: { pools: [], extra: true } });
    expect(top.json.error).toStartWith("invalid request body: ");
    const owned = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", egress: true }] } });
    expect([owned.status, owned.json.error]).toEqual([400, 'invalid request body: field "egress" is config-owned']);
  });

  test("5. mints ids and tokens in the real formats, deterministically with a seed", async () => {
    const a = await sim({ seed: 42 });
    const b = await sim({ seed: 42 });
    const ra = (await claim(a)).json;
    const rb = (await claim(b)).json;
    expect(SANDBOX_ID_RE.test(ra.id)).toBe(true);
    expect(SANDBOX_TOKEN_RE.test(ra.token)).toBe(true);
    expect([ra.id, ra.token]).toEqual([rb.id, rb.token]);
    const ck = (await call(a, "POST", `/v1/sandboxes/${ra.id}/checkpoint`, { body: {} })).json.checkpoint;
    expect(CHECKPOINT_ID_RE.test(ck.id)).toBe(true);
    const unseeded = (await claim(await sim())).json;
    expect(unseeded.id).not.toBe(ra.id);
    expect(SANDBOX_ID_RE.test(unseeded.id)).toBe(true);
  });
});
