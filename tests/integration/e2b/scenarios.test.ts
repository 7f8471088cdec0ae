// docs/e2b.md's acceptance scenarios at the REST level (the SDK-level ones are in sdk.test.ts). Each test is named
// after its scenario number. sandbox-e2b runs in-process on simulated sandboxd nodes (development substrate).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { KEY_A, KEY_B, ROOT, SECRET, sdkOpts, startStack, type Stack } from "./harness.ts";
import { until } from "#tests/support/wait.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { envdAccessToken } from "#shared/e2b/tokens.ts";
import { E2bSurface } from "#shared/e2b/surface.ts";
import { createLogger } from "#shared/log/index.ts";

interface Reply {
  status: number;
  json: any;
  headers: Headers;
}
async function api(s: Stack, method: string, path: string, o: { key?: string | null; body?: unknown; raw?: string } = {}): Promise<Reply> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  const key = o.key === undefined ? KEY_A : o.key;
  if (key !== null) headers["x-api-key"] = key;
  const r = await fetch(`${s.apiUrl}${path}`, { method, headers, body: o.raw ?? (o.body === undefined ? undefined : JSON.stringify(o.body)) });
  const text = await r.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = text;
  }
  return { status: r.status, json, headers: r.headers };
}
const claimBodies = (s: Stack) => s.cluster.nodes.flatMap((n) => n.requests.filter((e) => e.route === "claim").map((e) => e.body as Record<string, unknown>));
const raw = (id: string) => id.replace(/^sb-/, "sb_");
const claimOf = (s: Stack, id: string) => s.cluster.nodes.flatMap((n) => n.claims()).find((c) => c.id === raw(id));

describe("one node", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ pools: ["img:1/none/small=6", "img:1/egress/small=2", "empty/none/small=0"] });
  });
  afterAll(() => s.stop());
  const create = async (body: Record<string, unknown> = {}, key: string = KEY_A) => api(s, "POST", "/v2/sandboxes", { key, body: { templateID: "base", ...body } });

  test("1: no key or a wrong key => 401 invalid API key, no claim sent", async () => {
    const before = claimBodies(s).length;
    for (const key of [null, "e2b_nope"]) {
      const r = await create({}, key as string);
      expect(r.status).toBe(401);
      expect(r.json).toEqual({ code: 401, message: "invalid API key" });
    }
    expect(claimBodies(s).length).toBe(before);
  });

  test("2: GET /health without a key => 204", async () => {
    expect((await api(s, "GET", "/health", { key: null })).status).toBe(204);
  });

  test("8 + 15: alias base => the node sees {template:img, net:none, size:small}; reply has templateID, alias, public id, domain, envdVersion, the derived token", async () => {
    const r = await create();
    expect(r.status).toBe(201);
    const body = claimBodies(s).at(-1)!;
    expect(body).toMatchObject({ template: "img:1", net: "none", size: "small", ttl_seconds: 300 });
    expect(body.claim_ref).toMatch(/^team-a\/e2b-[0-9a-f]+$/);
    expect(r.json.templateID).toBe("img:1");
    expect(r.json.alias).toBe("base");
    expect(r.json.sandboxID).toMatch(/^sb-[0-9a-f]+$/);
    expect(r.json.domain).toBe("sandbox.test");
    expect(r.json.envdVersion).toBe("0.8.0");
    expect(r.json.envdAccessToken).toBe(envdAccessToken(SECRET, claimOf(s, r.json.sandboxID)!.id, claimOf(s, r.json.sandboxID)!.token));
    expect(r.json.clientID).toMatch(/^[0-9a-f]{16}$/);
    expect(JSON.stringify(r.json)).not.toContain("127.0.0.1");
    expect(r.json.trafficAccessToken).toBeUndefined();
  });

  test("10: a known image whose pools are all warm 0 => 503 (SDK: ServiceBusyError)", async () => {
    const r = await create({ templateID: "empty" });
    expect(r.status).toBe(503);
    expect(r.json.message).toContain('no warm sandbox available for template "empty"');
    const err = await Sandbox.create("empty", sdkOpts(s)).catch((e) => e);
    expect(err.constructor.name).toBe("ServiceBusyError");
  });

  test("14: envd /init answers 500 => the claim is released and the create is 500 failed to start the sandbox", async () => {
    s.guest.initStatus = 500;
    try {
      const releases = () => s.cluster.nodes[0]!.requests.filter((e) => e.route === "release").length;
      const before = releases();
      const r = await create();
      expect(r).toMatchObject({ status: 500, json: { code: 500, message: "failed to start the sandbox", error_code: "sandbox_create_failed" } });
      expect(releases()).toBe(before + 1);
    } finally {
      s.guest.initStatus = 204;
    }
  });

  test("16: allow_internet_access omitted => none without egress field; false => none + egress:false; true => egress", async () => {
    await create();
    expect(claimBodies(s).at(-1)!.net).toBe("none");
    expect("egress" in claimBodies(s).at(-1)!).toBe(false);
    await create({ allow_internet_access: false });
    expect(claimBodies(s).at(-1)).toMatchObject({ net: "none", egress: false });
    await create({ allow_internet_access: true });
    expect(claimBodies(s).at(-1)!.net).toBe("egress");
  });

  test("17: refused options => 400 naming the option, no claim", async () => {
    const before = claimBodies(s).length;
    for (const [extra, word] of [
      [{ secure: false }, "secure"],
      [{ network: { allowOut: ["1.1.1.1"] } }, "network"],
      [{ mcp: { x: {} } }, "mcp"],
      [{ volumeMounts: [{ name: "v", path: "/v" }] }, "volumeMounts"],
      [{ autoPause: true, allow_internet_access: true }, "autoPause"],
      [{ autoPauseMemory: false }, "autoPauseMemory"],
      [{ autoResume: { enabled: false } }, "autoResume"],
      [{ iam: { role: "x" } }, "iam"],
    ] as const) {
      const r = await create(extra);
      expect([word, r.status]).toEqual([word, 400]);
      expect(r.json.message).toContain(word);
    }
    expect(claimBodies(s).length).toBe(before);
    // Decision: autoResume {enabled:true} is accepted (valid-token traffic wakes a paused sandbox anyway).
    expect((await create({ autoResume: { enabled: true } })).status).toBe(201);
  });

  test("18: autoPause:true => the claim carries on_expire archive", async () => {
    await create({ autoPause: true });
    expect(claimBodies(s).at(-1)!.on_expire).toBe("archive");
  });

  test("19: 17 metadata pairs => the node's 400 and message pass through", async () => {
    const metadata = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"]));
    const r = await create({ metadata });
    expect(r.status).toBe(400);
    expect(r.json.message).toContain("metadata");
  });

  test("blank templateID, e2b/ names and negative timeout", async () => {
    expect((await create({ templateID: " " })).json).toEqual({ code: 400, message: "templateID is required" });
    expect((await create({ templateID: "e2b/team-a/app" })).json).toEqual({ code: 404, message: 'template "e2b/team-a/app" not found' });
    // Any spelling of the prefix (issue 27: a node need not match names the way we compare them).
    expect((await create({ templateID: "E2B/team-b/app" })).json).toEqual({ code: 404, message: 'template "E2B/team-b/app" not found' });
    expect((await create({ timeout: -1 })).json).toEqual({ code: 400, message: "timeout must be >= 0" });
    const bad = await api(s, "POST", "/v2/sandboxes", { raw: "{nope" });
    expect(bad.status).toBe(400);
    expect(bad.json.message).toStartWith("invalid request body:");
    const wrongType = await api(s, "POST", "/v2/sandboxes", { body: { templateID: 5 } });
    expect(wrongType.status).toBe(400);
    expect(wrongType.json.message).toContain("templateID");
  });

  test("20 + 45: another namespace's key gets 404 on get/kill/pause/connect/metrics/logs/timeout/fork/snapshot; logs of a visible sandbox are empty", async () => {
    const sbx = (await create()).json;
    for (const [m, p] of [
      ["GET", `/sandboxes/${sbx.sandboxID}`],
      ["DELETE", `/sandboxes/${sbx.sandboxID}`],
      ["POST", `/sandboxes/${sbx.sandboxID}/pause`],
      ["POST", `/v2/sandboxes/${sbx.sandboxID}/connect`],
      ["GET", `/sandboxes/${sbx.sandboxID}/metrics`],
      ["GET", `/sandboxes/${sbx.sandboxID}/logs`],
      ["GET", `/v2/sandboxes/${sbx.sandboxID}/logs`],
      ["POST", `/sandboxes/${sbx.sandboxID}/fork`],
      ["POST", `/sandboxes/${sbx.sandboxID}/snapshots`],
    ] as const) {
      const r = await api(s, m, p, { key: KEY_B });
      expect([m, p, r.status]).toEqual([m, p, 404]);
    }
    expect((await api(s, "POST", `/sandboxes/${sbx.sandboxID}/timeout`, { key: KEY_B, body: { timeout: 10 } })).status).toBe(404);
    expect((await api(s, "GET", `/sandboxes/${sbx.sandboxID}`)).json.state).toBe("running");
    expect((await api(s, "GET", `/sandboxes/${sbx.sandboxID}/logs`)).json).toEqual({ logs: [], logEntries: [] });
    expect((await api(s, "GET", `/v2/sandboxes/${sbx.sandboxID}/logs`)).json).toEqual({ logs: [] });
    expect((await api(s, "GET", `/sandboxes/sb-00000000deadbeef/logs`)).status).toBe(404);
    // Either id spelling names the same sandbox.
    expect((await api(s, "GET", `/sandboxes/${raw(sbx.sandboxID)}`)).json.sandboxID).toBe(sbx.sandboxID);
  });

  test("25 + 26: bad paging and filter parameters => 400", async () => {
    for (const q of ["limit=0", "limit=101", "limit=abc", "order=sideways", "nextToken=%%%", "nextToken=Zm9v", "metadata=novalue", "state=sleeping", "startedAfter=yesterday"]) {
      const r = await api(s, "GET", `/v2/sandboxes?${q}`);
      expect([q, r.status]).toEqual([q, 400]);
      expect(r.json.code).toBe(400);
    }
  });

  test("28: kill of a sandbox the node already reaped but the view still lists => 204", async () => {
    const sbx = (await create()).json;
    await until(async () => (await api(s, "GET", "/sandboxes")).json.some((x: { sandboxID: string }) => x.sandboxID === sbx.sandboxID), "the new sandbox in the list", 3_000, 25);
    s.cluster.nodes[0]!.vanish(raw(sbx.sandboxID));
    expect((await api(s, "DELETE", `/sandboxes/${sbx.sandboxID}`)).status).toBe(204);
  });

  test("29: kill of an unknown id => 404 with body code 404", async () => {
    expect(await api(s, "DELETE", "/sandboxes/sb-0000000000000bad")).toMatchObject({ status: 404, json: { code: 404 } });
  });

  test("31: setTimeout on an archived sandbox => the node's 409 passes through", async () => {
    const sbx = (await create()).json;
    s.cluster.nodes[0]!.archive(raw(sbx.sandboxID));
    const r = await api(s, "POST", `/sandboxes/${sbx.sandboxID}/timeout`, { body: { timeout: 60 } });
    expect(r.status).toBe(409);
    expect((await api(s, "POST", `/sandboxes/${sbx.sandboxID}/timeout`, { body: { timeout: -5 } })).status).toBe(400);
    expect((await api(s, "POST", `/sandboxes/${sbx.sandboxID}/timeout`, { raw: "" })).json.message).toBe("invalid request body: empty");
  });

  test("refreshes (older SDKs): duration > 0 renews to it, none renews to the default; legacy resume of a paused sandbox with autoPause sets on_expire", async () => {
    const sbx = (await create({ timeout: 30 })).json;
    expect((await api(s, "POST", `/sandboxes/${sbx.sandboxID}/refreshes`, { body: { duration: 120 } })).status).toBe(204);
    const renews = () => s.cluster.nodes[0]!.requests.filter((e) => e.route === "renew");
    expect((renews().at(-1)!.body as { ttl_seconds: number }).ttl_seconds).toBe(120);
    expect((await api(s, "POST", `/sandboxes/${sbx.sandboxID}/refreshes`)).status).toBe(204);
    expect((renews().at(-1)!.body as { ttl_seconds: number }).ttl_seconds).toBe(300);
    await api(s, "POST", `/sandboxes/${sbx.sandboxID}/pause`);
    const resumed = await api(s, "POST", `/sandboxes/${sbx.sandboxID}/resume`, { body: { timeout: 60, autoPause: true } });
    expect(resumed.status).toBe(201);
    expect(renews().at(-1)!.body).toMatchObject({ on_expire: "archive" });
    // The legacy list answers every match unpaged (limit is not its parameter), with no X-Next-Token.
    await create();
    await until(async () => (await api(s, "GET", "/sandboxes")).json.length >= 2, "two sandboxes in the list", 3_000, 25);
    const legacy = await api(s, "GET", "/sandboxes?limit=1");
    expect(legacy.headers.get("x-next-token")).toBeNull();
    expect(legacy.json.length).toBeGreaterThanOrEqual(2);
  });

  test("33 + 36: connect with memory:false => 400; legacy resume of a running sandbox => 409", async () => {
    const sbx = (await create()).json;
    expect((await api(s, "POST", `/v2/sandboxes/${sbx.sandboxID}/connect`, { body: { memory: false } })).status).toBe(400);
    expect((await api(s, "POST", `/sandboxes/${sbx.sandboxID}/resume`, { body: {} })).status).toBe(409);
  });

  test("34: paused with 100 s left, connect timeout 600 => wake, renew to 600, 201, the create token", async () => {
    const sbx = (await create({ timeout: 100 })).json;
    expect((await api(s, "POST", `/sandboxes/${sbx.sandboxID}/pause`)).status).toBe(204);
    const r = await api(s, "POST", `/v2/sandboxes/${sbx.sandboxID}/connect`, { body: { timeout: 600 } });
    expect(r.status).toBe(201);
    expect(r.json.envdAccessToken).toBe(sbx.envdAccessToken);
    const renew = s.cluster.nodes[0]!.requests.filter((e) => e.route === "renew").at(-1)!;
    expect((renew.body as { ttl_seconds: number }).ttl_seconds).toBe(600);
    const info = (await api(s, "GET", `/sandboxes/${sbx.sandboxID}`)).json;
    expect(info.state).toBe("running");
    expect(Date.parse(info.endAt) - Date.now()).toBeGreaterThan(590_000);
  });

  test("37 + 38: fork writes instance metadata before each /init; a paused parent => 409; a failing child /init => every child released, 500", async () => {
    const parent = (await create()).json;
    const log = s.cluster.nodes[0]!.log;
    const seq0 = s.cluster.nodes[0]!.requests.at(-1)!.seq;
    const ok = await api(s, "POST", `/sandboxes/${parent.sandboxID}/fork`, { body: { count: 2 } });
    expect(ok.status).toBe(201);
    expect(ok.json).toHaveLength(2);
    for (const { sandbox } of ok.json) {
      const meta = log.entries.find((e) => e.seq > seq0 && e.route === "instance-metadata" && e.path.includes(raw(sandbox.sandboxID)))!;
      expect((meta.body as { accessTokenHash: string }).accessTokenHash).toMatch(/^[0-9a-f]{128}$/);
      const relay = log.entries.find((e) => e.seq > meta.seq && e.route === "ports" && e.path.includes(raw(sandbox.sandboxID)));
      expect(relay).toBeDefined();
    }
    expect((await api(s, "POST", `/sandboxes/${parent.sandboxID}/fork`, { body: { count: 0 } })).status).toBe(400);
    s.guest.initStatus = 500;
    try {
      const releases = () => s.cluster.nodes[0]!.requests.filter((e) => e.route === "release").length;
      const r0 = releases();
      const bad = await api(s, "POST", `/sandboxes/${parent.sandboxID}/fork`, { body: { count: 2 } });
      expect(bad.json).toEqual({ code: 500, message: "failed to fork the sandbox", error_code: "internal_server_error" });
      expect(releases()).toBe(r0 + 2);
    } finally {
      s.guest.initStatus = 204;
    }
    await api(s, "POST", `/sandboxes/${parent.sandboxID}/pause`);
    expect((await api(s, "POST", `/sandboxes/${parent.sandboxID}/fork`, { body: {} })).status).toBe(409);
  });

  test("39: a snapshot name over the namespace budget => 400 naming the room left", async () => {
    const sbx = (await create()).json;
    const r = await api(s, "POST", `/sandboxes/${sbx.sandboxID}/snapshots`, { body: { name: "x".repeat(60) } });
    expect(r.status).toBe(400);
    expect(r.json.message).toContain('at most 56 characters in namespace "team-a"');
  });

  test("24: /v2 paging by limit returns X-Next-Token until the last page", async () => {
    const tag = `page-${Date.now()}`;
    for (let i = 0; i < 3; i++) await create({ metadata: { tag } });
    await until(async () => (await api(s, "GET", `/sandboxes?metadata=${encodeURIComponent(`tag=${tag}`)}`)).json.length === 3, "three tagged sandboxes in the list", 3_000, 25);
    const seen: string[] = [];
    let token = "";
    for (let page = 0; page < 3; page++) {
      const r = await api(s, "GET", `/v2/sandboxes?limit=1&metadata=${encodeURIComponent(`tag=${tag}`)}${token ? `&nextToken=${token}` : ""}`);
      expect(r.json).toHaveLength(1);
      seen.push(r.json[0].sandboxID);
      token = r.headers.get("x-next-token") ?? "";
      expect(Boolean(token)).toBe(page < 2);
    }
    expect(new Set(seen).size).toBe(3);
  });

  test("43: metrics of a paused sandbox => [] and the node received no wake", async () => {
    const sbx = (await create()).json;
    await api(s, "POST", `/sandboxes/${sbx.sandboxID}/pause`);
    const wakes = () => s.cluster.nodes[0]!.requests.filter((e) => e.route === "wake").length;
    const w = wakes();
    expect((await api(s, "GET", `/sandboxes/${sbx.sandboxID}/metrics`)).json).toEqual([]);
    expect(wakes()).toBe(w);
    expect(claimOf(s, sbx.sandboxID)!.state).toBe("hibernated");
  });

  test("44: sandbox_ids with 101 ids or a duplicate => 400; valid ids => metrics keyed as given", async () => {
    const ids = Array.from({ length: 101 }, (_, i) => `sb-${i}`).join(",");
    expect((await api(s, "GET", `/sandboxes/metrics?sandbox_ids=${ids}`)).status).toBe(400);
    expect((await api(s, "GET", "/sandboxes/metrics?sandbox_ids=a,a")).status).toBe(400);
    const sbx = (await create()).json;
    const r = await api(s, "GET", `/sandboxes/metrics?sandbox_ids=${sbx.sandboxID},sb-0000000000000bad`);
    expect(Object.keys(r.json.sandboxes)).toEqual([sbx.sandboxID]);
    expect(r.json.sandboxes[sbx.sandboxID].cpuCount).toBe(2);
  });

  test("46: template aliases: base => its image; an advertised image => itself; unknown => 404", async () => {
    expect((await api(s, "GET", "/templates/aliases/base")).json).toEqual({ templateID: "img:1", public: true });
    expect((await api(s, "GET", "/templates/aliases/empty")).json).toEqual({ templateID: "empty", public: true });
    expect(await api(s, "GET", "/templates/aliases/nope")).toMatchObject({ status: 404, json: { message: 'template alias "nope" not found' } });
    const list = (await api(s, "GET", "/templates")).json as { templateID: string; aliases: string[] }[];
    expect(list.find((t) => t.templateID === "img:1")!.aliases).toEqual(["base"]);
    expect((await api(s, "GET", "/templates/img:1")).json.message).toContain("is a pool image, not a built template");
  });

  test("52 + 53: a built template is a create target (require_promoted) with its builds listed; DELETE /templates/{name} deletes it on its holder", async () => {
    const sbx = (await create()).json;
    const client = new SandboxdClient({ baseUrl: s.cluster.nodes[0]!.url, token: ROOT });
    await client.promote(raw(sbx.sandboxID), { template: "e2b/team-a/app" });
    await until(async () => ((await api(s, "GET", "/templates")).json as { templateID: string }[]).some((t) => t.templateID === "app"), "template app in the list", 3_000, 25);
    expect((await api(s, "GET", "/templates", { key: KEY_B })).json.some((t: { templateID: string }) => t.templateID === "app")).toBe(false);
    // 52: a create naming it claims the promoted template with require_promoted, and envd /init keeps its user.
    const inits = s.guest.inits.length;
    const made = await api(s, "POST", "/v2/sandboxes", { body: { templateID: "app" } });
    expect(made.status).toBe(201);
    expect(made.json.templateID).toBe("app");
    expect(claimBodies(s).at(-1)).toMatchObject({ template: "e2b/team-a/app", require_promoted: true });
    expect(s.guest.inits.length).toBe(inits + 1);
    expect(s.guest.inits.at(-1)!.defaultUser).toBeUndefined();
    expect((await api(s, "POST", "/v2/sandboxes", { key: KEY_B, body: { templateID: "app" } })).status).toBe(404);
    const detail = await api(s, "GET", "/templates/app");
    expect(detail.json.builds).toHaveLength(1);
    expect(detail.json.builds[0].buildID).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect((await api(s, "PATCH", "/templates/app", { body: { public: true } })).status).toBe(200);
    // The CLI's `e2b template publish/unpublish` (v2): accepted, visibility unchanged, the names as e2b answers them.
    for (const pub of [true, false]) expect(await api(s, "PATCH", "/v2/templates/app", { body: { public: pub } })).toMatchObject({ status: 200, json: { names: ["app"] } });
    expect((await api(s, "PATCH", "/v2/templates/app", { key: KEY_B, body: { public: true } })).status).toBe(404);
    expect((await api(s, "PATCH", "/v2/templates/img:1", { body: { public: false } })).json.message).toContain("is a pool image, not a built template");
    expect((await api(s, "PATCH", "/v2/templates/app", { raw: '{"public":"yes"}' })).status).toBe(400);
    await api(s, "DELETE", `/sandboxes/${made.json.sandboxID}`);
    expect((await api(s, "DELETE", "/templates/app")).status).toBe(204);
    expect(s.cluster.nodes[0]!.requests.filter((e) => e.route === "template-delete")).toHaveLength(1);
  });

  test("54: a body over 1 MiB => 400; unserved routes => 501 naming the route; unknown routes => 404 envelope", async () => {
    const r = await api(s, "POST", "/v2/sandboxes", { raw: JSON.stringify({ templateID: "base", metadata: { x: "y".repeat(1_100_000) } }) });
    expect(r.status).toBe(400);
    expect(r.json.message).toContain("larger than");
    // PUT /sandboxes/{id}/network is served (its egress fields refused by name: tests/e2e/errors/refused-options.test.ts).
    const net = await api(s, "PUT", "/sandboxes/sb-1/network", { body: {} });
    expect(net).toMatchObject({ status: 404, json: { message: 'sandbox "sb-1" not found' } });
    expect((await api(s, "POST", "/v3/templates", { body: {} })).status).toBe(501);
    expect(await api(s, "GET", "/nothing/here")).toMatchObject({ status: 404, json: { code: 404 } });
  });

  test("/openapi.json describes every route with the schemas the routes validate with", async () => {
    const doc = (await api(s, "GET", "/openapi.json", { key: null })).json;
    expect(doc.openapi).toBe("3.1.0");
    for (const p of ["/v2/sandboxes", "/sandboxes/{sandboxID}", "/sandboxes/{sandboxID}/connect", "/snapshots", "/templates/aliases/{alias}", "/health"]) expect(doc.paths[p]).toBeDefined();
    expect(doc.components.schemas.NewSandbox.required).toEqual(["templateID"]);
    expect(doc.components.schemas.Error.properties.code.type).toBe("integer");
  });
});

describe("placement across nodes", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ nodes: 2, pools: ["img:1/none/small=4"] });
  });
  afterAll(() => s.stop());

  test("12: the first node answers 429, the second has capacity => every claim lands on the second", async () => {
    const [n0, n1] = s.cluster.nodes;
    n0!.fail("claim", 429, { error: "no warm capacity" }, Infinity);
    try {
      for (let i = 0; i < 4; i++) {
        const sbx = await Sandbox.create("base", sdkOpts(s));
        expect(n1!.claims().some((c) => c.id === raw(sbx.sandboxId))).toBe(true);
        await sbx.kill();
      }
    } finally {
      n0!.clearFaults();
    }
  });

  test("13: a claim answered with a redirect => the peer is called with no_redirect:true and its sandbox returned", async () => {
    const [n0, n1] = s.cluster.nodes;
    n0!.forceRedirect([n1!.addr]);
    n1!.forceRedirect([n0!.addr]);
    try {
      const sbx = await Sandbox.create("base", sdkOpts(s));
      const owner = s.cluster.nodes.find((n) => n.claims().some((c) => c.id === raw(sbx.sandboxId)))!;
      const last = owner.requests.filter((e) => e.route === "claim").at(-1)!;
      expect((last.body as { no_redirect?: boolean }).no_redirect).toBe(true);
      await sbx.kill();
    } finally {
      n0!.forceRedirect(null);
      n1!.forceRedirect(null);
    }
  });

  test("40 + 41: one node down => GET /snapshots answers with the others; deleting an unlisted snapshot => 500, not 404", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    const snap = await sbx.createSnapshot({ name: "keep" });
    const owner = s.cluster.nodes.find((n) => n.claims().some((c) => c.id === raw(sbx.sandboxId)))!;
    const other = s.cluster.nodes.find((n) => n !== owner)!;
    other.fail("checkpoints", 500, { error: "down" }, Infinity);
    try {
      const list = await api(s, "GET", "/snapshots");
      expect(list.status).toBe(200);
      expect(list.json.map((x: { snapshotID: string }) => x.snapshotID)).toContain(snap.snapshotId);
      const del = await api(s, "DELETE", "/templates/ck_00000000000000ff");
      expect(del).toMatchObject({ status: 500, json: { message: "failed to delete the snapshot: a node did not answer" } });
    } finally {
      other.clearFaults();
    }
    expect((await api(s, "DELETE", "/templates/ck_00000000000000ff")).status).toBe(404);
    await sbx.kill();
  });

  test("11: sandboxd down on every candidate => 503 after each was tried", async () => {
    const s2 = await startStack({ nodes: 2, pools: ["img:1/none/small=2"] });
    try {
      // Connection refused on both (they stay in the view for 3 polls): each is tried, then 503.
      for (const n of s2.cluster.nodes) await n.stop();
      const r = await api(s2, "POST", "/v2/sandboxes", { body: { templateID: "base" } });
      expect(r.status).toBe(503);
      expect(r.json.message).toContain("no warm sandbox available");
    } finally {
      await s2.stop();
    }
  });

  test("23 + 42: a sandbox not yet in the view is found by a live read; once its node leaves the view, get and kill answer 404", async () => {
    const s2 = await startStack({ nodes: 2, extraFlags: ["--inventory-poll=150ms"] });
    try {
      const n0 = s2.cluster.nodes[0]!;
      const direct = await new SandboxdClient({ baseUrl: n0.url, token: ROOT }).claim({ template: "img:1", claim_ref: "team-a/manual" });
      const id = direct.id.replace("sb_", "sb-");
      expect((await api(s2, "GET", `/sandboxes/${id}`)).json.sandboxID).toBe(id);
      expect((await api(s2, "GET", `/sandboxes/${id}`, { key: KEY_B })).status).toBe(404);
      n0.fail("info", 500, { error: "down" }, Infinity);
      n0.fail("get", 500, { error: "down" }, Infinity);
      await Bun.sleep(800);
      expect((await api(s2, "GET", `/sandboxes/${id}`)).status).toBe(404);
      expect((await api(s2, "DELETE", `/sandboxes/${id}`)).status).toBe(404);
      expect((await api(s2, "GET", "/sandboxes")).json.some((x: { sandboxID: string }) => x.sandboxID === id)).toBe(false);
    } finally {
      await s2.stop();
    }
  });
});

describe("keys and anonymous mode together", () => {
  test("5: keys configured plus --e2b-allow-anonymous: no key => 401", async () => {
    const s = await startStack({ anonymous: true });
    try {
      expect((await api(s, "POST", "/v2/sandboxes", { key: null, body: { templateID: "base" } })).status).toBe(401);
    } finally {
      await s.stop();
    }
  });
});

describe("placement on a lagging view", () => {
  test("a snapshot that shows a pool with a warm target but 0 warm VMs (a refill not seen yet) still claims there; target 0 never does", async () => {
    const s = await startStack({ pools: ["img:1/none/small=3", "cold/none/small=0"] });
    try {
      const real = s.mesh.fleet;
      // The view as it would look right after a burst drained the pool: warm 0, target still 3.
      const lagging = {
        nodes: () => real.nodes().map((n) => ({ ...n, pools: n.pools.map((p) => ({ ...p, warm: 0 })) })),
        ready: () => Promise.resolve(),
        stop: () => Promise.resolve(),
      };
      const surface = new E2bSurface(
        { namespace: "team-a", domain: "sandbox.test", envdVersion: "0.8.0", defaultTimeoutSeconds: 300, aliases: new Map(), envdSecret: SECRET, rootToken: ROOT },
        { fleet: lagging, log: createLogger({ level: "error", name: "test" }) },
      );
      const made = await surface.create("team-a", { templateID: "img:1" });
      expect(made.sandboxID).toMatch(/^sb-/);
      const err = await surface.create("team-a", { templateID: "cold" }).catch((e) => e);
      expect(err.status).toBe(503);
    } finally {
      await s.stop();
    }
  });
});
