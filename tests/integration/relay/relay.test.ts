// The envd relay in sandbox-e2b (in-process, --envd-proxy-bind-address) against simulated sandboxd nodes and the
// test guest: one test per acceptance scenario of docs/envd-relay.md that this substrate can exercise.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import http2 from "node:http2";
import { Sandbox } from "e2b";
import { DOMAIN, ROOT, SECRET, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";
import { countedBytes, generatedBody } from "../e2b/guest.ts";
import { until } from "#tests/support/wait.ts";
import { deriveAccessToken, envdAccessToken } from "#shared/e2b/tokens.ts";
import { fileSignature } from "#shared/sandboxd/urls.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ proxy: true, extraFlags: ["--metrics-bind-address=127.0.0.1:0"] });
});
afterAll(async () => {
  await s.stop();
});

const node = () => s.cluster.nodes[0]!;
const tokenOf = (sbx: Sandbox) => (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
const claimId = (sbx: Sandbox) => sbx.sandboxId.replace(/^sb-/, "sb_");
const portsCalls = () => node().requests.filter((e) => e.route === "ports");
// Node calls made for a request: everything but the fleet poller's background info/list reads (every 200 ms, so
// how many land during a test depends on how long the machine lets it take).
const requestCalls = () => node().requests.filter((e) => e.route !== "info" && e.route !== "list").length;

async function create(): Promise<Sandbox> {
  return Sandbox.create("base", sdkOpts(s));
}

interface Call {
  host?: string;
  headers?: Record<string, string>;
  method?: string;
  body?: BodyInit | null;
}
async function call(path: string, c: Call = {}, on: Stack = s): Promise<Response> {
  const headers: Record<string, string> = { ...(c.headers ?? {}) };
  if (c.host) headers.host = c.host;
  return fetch(`${on.proxyUrl}${path}`, { method: c.method ?? "GET", headers, body: c.body ?? null, ...(c.body instanceof ReadableStream ? { duplex: "half" } : {}) } as RequestInit);
}
const hostFor = (id: string, port = 49983) => `${port}-${id}.${DOMAIN}`;

describe("routing and admission", () => {
  test("3: /healthz with no sandbox named and no token => 204, empty body; on a sandbox host it is the guest's path", async () => {
    const r = await call("/healthz");
    expect(r.status).toBe(204);
    expect(await r.text()).toBe("");
    const apex = await call("/healthz", { host: DOMAIN });
    expect(apex.status).toBe(204);
    const onSandbox = await call("/healthz", { host: hostFor("sb-0000000000000001") });
    expect(onSandbox.status).toBe(401);
  });

  test("4 + 16 + 17: host routing reaches the node's ports relay with the claim token; the guest sees the untouched request, X-Access-Token, no X-API-KEY, rewritten Host and X-Forwarded-*", async () => {
    const sbx = await create();
    const before = portsCalls().length;
    const r = await call("/files?path=/etc/hosts&x=1", { host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx), "x-api-key": "secret-key" } });
    expect(r.status).toBe(404); // the guest's own answer: no such file
    const relays = portsCalls().slice(before);
    expect(relays).toHaveLength(1);
    expect(relays[0]!.path).toBe(`/v1/sandboxes/${claimId(sbx)}/ports/49983`);
    expect(relays[0]!.auth).toBe("sandbox");
    const seen = s.guest.requests.at(-1)!;
    expect(seen.path).toBe("/files?path=/etc/hosts&x=1");
    expect(seen.headers["x-access-token"]).toBe(tokenOf(sbx));
    expect(seen.headers["x-api-key"]).toBeUndefined();
    expect(seen.headers.host).toBe(hostFor(sbx.sandboxId));
    expect(seen.headers["x-forwarded-host"]).toBe(hostFor(sbx.sandboxId));
    expect(seen.headers["x-forwarded-proto"]).toBe("http");
    expect(seen.headers["x-forwarded-for"]).toBe("127.0.0.1");
    expect(Object.values(seen.headers).join(" ")).not.toContain(node().claims().find((c) => c.id === claimId(sbx))!.token);
    await sbx.kill();
  });

  test("5: uppercase host with :443 is routed as the lowercase id and the label's port", async () => {
    const sbx = await create();
    const r = await call("/echo", { host: `49983-${sbx.sandboxId.toUpperCase()}.${DOMAIN.toUpperCase()}:443`, headers: { "x-access-token": tokenOf(sbx) } });
    expect(r.status).toBe(200);
    expect((await r.json()).headers.host).toBe(hostFor(sbx.sandboxId));
    await sbx.kill();
  });

  test("6 + 7 + 17: header routing on a shared host; headers win over a conflicting host; the guest sees the derived Host", async () => {
    const sbx = await create();
    const r = await call("/echo", { host: `3000-sb-ffffffffffffffff.${DOMAIN}`, headers: { "e2b-sandbox-id": sbx.sandboxId, "e2b-sandbox-port": "49983", "x-access-token": tokenOf(sbx) } });
    expect(r.status).toBe(200);
    expect((await r.json()).headers.host).toBe(hostFor(sbx.sandboxId));
    expect(portsCalls().at(-1)!.path).toBe(`/v1/sandboxes/${claimId(sbx)}/ports/49983`);
    const other = await call("/echo", { host: "proxy.example", headers: { "e2b-sandbox-id": sbx.sandboxId, "e2b-sandbox-port": "8080", "x-access-token": tokenOf(sbx) } });
    expect(portsCalls().at(-1)!.path).toBe(`/v1/sandboxes/${claimId(sbx)}/ports/8080`);
    // Nothing listens on guest port 8080: the node answers 502 and so do we.
    expect(other.status).toBe(502);
    expect((await other.json()).message).toBe("sandbox unreachable");
    await sbx.kill();
  });

  test("8 + 9: bad port header and unroutable hosts => 400 without a node call", async () => {
    const before = requestCalls();
    const bad = await call("/x", { headers: { "e2b-sandbox-id": "sb-abc", "e2b-sandbox-port": "abc", "x-access-token": "t" } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ code: 400, message: "no sandbox in the request host or headers" });
    const missing = await call("/x", { headers: { "e2b-sandbox-id": "sb-abc", "x-access-token": "t" } });
    expect(missing.status).toBe(400);
    for (const host of ["example.com", `sb-abc.${DOMAIN}`, `-sb-abc.${DOMAIN}`, `0-sb-abc.${DOMAIN}`, `x-sb-abc.${DOMAIN}`, `a.b-sb.${DOMAIN}`, `70000-sb.${DOMAIN}`, `+22-sb.${DOMAIN}`]) {
      const r = await call("/x", { host, headers: { "x-access-token": "t" } });
      expect([host, r.status]).toEqual([host, 400]);
    }
    expect(requestCalls()).toBe(before);
  });

  test("10: envd-internal paths => 404 with a valid token, nothing reaches the node", async () => {
    const sbx = await create();
    const before = portsCalls().length;
    for (const p of ["/init", "/INIT", "/init/", "/freeze", "/collapse", "/fsthaw"]) {
      const r = await call(p, { method: "POST", host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } });
      expect([p, r.status]).toEqual([p, 404]);
    }
    expect(portsCalls().length).toBe(before);
    await sbx.kill();
  });

  test("11 + 12: no token => 401 missing; wrong token => 401 invalid, no relay opened", async () => {
    const sbx = await create();
    const before = portsCalls().length;
    const none = await call("/process.Process/Start", { method: "POST", host: hostFor(sbx.sandboxId) });
    expect(await none.json()).toEqual({ code: 401, message: "missing X-Access-Token" });
    // Publish first (the owner must be known for a wrong token to be provable), then present a wrong one.
    await call("/echo", { host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } });
    const relaysAfterGood = portsCalls().length;
    const wrong = await call("/echo", { host: hostFor(sbx.sandboxId), headers: { "x-access-token": "0".repeat(64) } });
    expect(await wrong.json()).toEqual({ code: 401, message: "invalid sandbox access token" });
    expect(portsCalls().length).toBe(relaysAfterGood);
    expect(relaysAfterGood).toBe(before + 1);
    await sbx.kill();
  });

  test("13: unknown id => 502 sandbox was not found; the body does not contain the id", async () => {
    const r = await call("/echo", { host: hostFor("sb-00000000deadbeef"), headers: { "x-access-token": "a".repeat(64) } });
    expect(r.status).toBe(502);
    const text = await r.text();
    expect(JSON.parse(text)).toEqual({ code: 502, message: "sandbox was not found" });
    expect(text).not.toContain("deadbeef");
  });

  test("in-process: a create through the surface tells the relay its owner, so the first request reads nothing from the node", async () => {
    const gets = () => node().requests.filter((e) => e.route === "get").length;
    const sbx = await create();
    const g0 = gets();
    const r = await call("/health", { host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } });
    expect(r.status).toBe(204);
    expect(gets()).toBe(g0);
    await sbx.kill();
  });
});

describe("lifecycle through the relay", () => {
  test("28 (decision): a kill through the e2b surface drops the cached owner at once: isRunning() is false right after", async () => {
    const sbx = await create();
    expect(await sbx.isRunning()).toBe(true);
    await sbx.kill();
    expect(await sbx.isRunning()).toBe(false);
  });

  test("15 + 28: the node refusing the relay with 404 for a cached owner (released elsewhere) => 502 and the entry is dropped", async () => {
    const sbx = await create();
    expect(await sbx.isRunning()).toBe(true);
    node().vanish(claimId(sbx));
    const r = await call("/health", { host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } });
    expect(r.status).toBe(502);
    expect(await sbx.isRunning()).toBe(false);
  });

  test("29: a signed GET /files URL without X-Access-Token relays with the root token (passive); on port 3000 of a non-public sandbox => 401", async () => {
    const sbx = await create();
    await sbx.files.write("/home/user/a.txt", "hello");
    const sig = fileSignature({ path: "/home/user/a.txt", operation: "read", user: "user", accessToken: tokenOf(sbx) });
    const q = `/files?path=/home/user/a.txt&username=user&signature=${encodeURIComponent(sig)}`;
    const r = await call(q, { host: hostFor(sbx.sandboxId) });
    expect(r.status).toBe(200);
    expect(await r.text()).toBe("hello");
    expect(portsCalls().at(-1)!.auth).toBe("root");
    // A signature opens only envd's port: on a user port of a sandbox whose ports are not public it is no credential.
    const priv = await Sandbox.create("base", { ...sdkOpts(s), network: { allowPublicTraffic: false } });
    const other = await call(q.replace(sbx.sandboxId, priv.sandboxId), { host: hostFor(priv.sandboxId, 3000) });
    expect(other.status).toBe(401);
    await priv.kill();
    await sbx.kill();
  });

  test("30 + 31: a signed URL to a paused sandbox => 409 sandbox is paused (as e2b cloud), it stays paused; a valid token wakes it", async () => {
    const sbx = await create();
    await sbx.pause();
    const sig = fileSignature({ path: "/x", operation: "read", user: "user", accessToken: tokenOf(sbx) });
    const r = await call(`/files?path=/x&username=user&signature=${encodeURIComponent(sig)}`, { host: hostFor(sbx.sandboxId) });
    expect(r.status).toBe(409);
    expect(await r.json()).toEqual({ code: 409, message: "sandbox is paused" });
    expect((await sbx.getInfo()).state).toBe("paused");
    const woke = await call("/health", { host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } });
    expect(woke.status).toBe(204);
    expect((await sbx.getInfo()).state).toBe("running");
    await sbx.kill();
  });

  test("32: two sequential requests => two node connections", async () => {
    const sbx = await create();
    const before = portsCalls().length;
    await (await call("/health", { host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } })).arrayBuffer();
    await (await call("/health", { host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } })).arrayBuffer();
    expect(portsCalls().length).toBe(before + 2);
    await sbx.kill();
  });

  test("14: the node unreachable => 502 sandbox unreachable; the body does not name the address", async () => {
    const s2 = await startStack({ proxy: true });
    try {
      const sbx = await Sandbox.create("base", sdkOpts(s2));
      expect(await sbx.isRunning()).toBe(true); // caches the owner
      await s2.cluster.nodes[0]!.stop();
      const r = await fetch(`${s2.proxyUrl}/health`, { headers: { host: hostFor(sbx.sandboxId), "x-access-token": tokenOf(sbx) } });
      const text = await r.text();
      expect(JSON.parse(text)).toEqual({ code: 502, message: "sandbox unreachable" });
      expect(text).not.toContain("127.0.0.1");
    } finally {
      await s2.stop();
    }
  });

  test("27: a node that leaves the fleet view (silent for 3 polls) => its uncached sandboxes answer 502", async () => {
    const s2 = await startStack({ proxy: true, nodes: 2 });
    try {
      const [n0] = s2.cluster.nodes;
      // Claimed by another replica, so this process never learnt its owner; its node then stops answering polls
      // (info fails) while its relay still works: only the fleet view goes stale.
      const direct = await new SandboxdClient({ baseUrl: n0!.url, token: ROOT }).claim({ template: "img:1", claim_ref: "team-a/stale" });
      n0!.fail("info", 500, { error: "down" }, Infinity);
      // Three failed 200 ms polls take the node out of the view; on a loaded machine the poller's timers run late, so
      // wait for the view itself rather than a fixed second (a request before that would find the owner and cache it).
      await until(() => s2.mesh.fleet.nodes().length === 1, "n0 to leave the fleet view (n1 stays)", 15_000, 25);
      const r = await fetch(`${s2.proxyUrl}/health`, { headers: { host: hostFor(direct.id.replace("sb_", "sb-")), "x-access-token": deriveAccessToken(SECRET, direct.token) } });
      expect(await r.json()).toEqual({ code: 502, message: "sandbox was not found" });
      void n0;
    } finally {
      await s2.stop();
    }
  });
});

describe("streaming", () => {
  test("21: a server stream reaches the client frame by frame, before the stream ends", async () => {
    const sbx = await create();
    const r = await call("/stream?n=4&gap=150", { host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } });
    const reader = r.body!.getReader();
    const firstAt = Date.now();
    const { value } = await reader.read();
    const gotFirst = Date.now();
    expect(new TextDecoder().decode(value)).toStartWith("frame 0");
    let rest = "";
    for (;;) {
      const x = await reader.read();
      if (x.done) break;
      rest += new TextDecoder().decode(x.value);
    }
    const ended = Date.now();
    expect(rest).toContain("frame 3");
    // The first frame arrived well before the stream's end (3 gaps of 150 ms later).
    expect(ended - gotFirst).toBeGreaterThan(300);
    void firstAt;
    await sbx.kill();
  });

  test("22: a streamed upload without Content-Length and a large download pass through whole (memory: memory.test.ts)", async () => {
    const sbx = await create();
    const SIZE = 32 * 1024 * 1024;
    const body = generatedBody(SIZE, 98);
    const up = await call("/upload", { method: "POST", body, host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } });
    expect(await up.json()).toEqual({ bytes: SIZE });
    const down = await call(`/download?size=${SIZE}`, { host: hostFor(sbx.sandboxId), headers: { "x-access-token": tokenOf(sbx) } });
    expect(await countedBytes(down)).toBe(SIZE);
    await sbx.kill();
  });

  test("a client that disconnects mid-stream leaves no tunnel or guest stream open", async () => {
    const sbx = await create();
    const ctl = new AbortController();
    const r = await fetch(`${s.proxyUrl}/download?size=${1024 * 1024 * 1024}`, { headers: { host: hostFor(sbx.sandboxId), "x-access-token": tokenOf(sbx) }, signal: ctl.signal });
    const reader = r.body!.getReader();
    await reader.read();
    ctl.abort();
    await until(() => s.guest.openStreams() === 0, "the guest's streams to close", 15_000, 25);
    const metrics = () => fetch(`http://127.0.0.1:${s.mesh.metricsPort}/metrics`).then((r) => r.text());
    await until(async () => (await metrics()).includes("sandbox_envd_proxy_open_tunnels 0"), "open_tunnels 0 in /metrics", 15_000, 25);
    await sbx.kill();
  });
});

describe("protocols", () => {
  test("20: a cleartext client speaking h2c by prior knowledge is answered over HTTP/2", async () => {
    const sbx = await create();
    const session = http2.connect(s.proxyUrl!);
    const st = session.request({ ":path": "/echo", ":authority": hostFor(sbx.sandboxId), "x-access-token": tokenOf(sbx) });
    const [status, body] = await new Promise<[number, string]>((resolve, reject) => {
      let st0 = 0;
      let d = "";
      st.on("response", (h) => (st0 = Number(h[":status"])));
      st.on("data", (c) => (d += c));
      st.on("end", () => resolve([st0, d]));
      st.on("error", reject);
    });
    session.close();
    expect(status).toBe(200);
    // The guest leg is HTTP/1.1 whatever the client spoke.
    expect(JSON.parse(body).headers.connection).toBe("close");
    await sbx.kill();
  });

  test("35: E2B_SANDBOX_URL-style header routing carries the SDK's files API", async () => {
    const sbx = await create();
    await sbx.files.write("/home/user/note.txt", "through the proxy");
    expect(await sbx.files.read("/home/user/note.txt")).toBe("through the proxy");
    await sbx.kill();
  });
});

void ROOT;
void SECRET;
void deriveAccessToken;

// "Unpublished here" must hold for the whole test: on the file's stack the view polls every 200 ms, and on a busy
// machine a poll listed the directly claimed sandbox before the first request (the inventory path then answered
// 401 for the wrong token, as it should for a listed sandbox). This stack polls once at start, then hourly.
describe("a sandbox this replica's view has not listed", () => {
  let quiet: Stack;
  beforeAll(async () => {
    quiet = await startStack({ proxy: true, extraFlags: ["--inventory-poll=1h"] });
  });
  afterAll(async () => {
    await quiet?.stop();
  });

  test("23 + 24: a sandbox another replica claimed (unpublished here) is found by the probe; a second request within 60 s makes no probe; a wrong token on the probe path => 502, nothing cached", async () => {
    const n = quiet.cluster.nodes[0]!;
    const listed = (claimId: string) => quiet.mesh.fleet.nodes().some((x) => x.entries.some((e) => e.id === claimId));
    const direct = await new SandboxdClient({ baseUrl: n.url, token: ROOT }).claim({ template: "img:1", claim_ref: "team-a/elsewhere" });
    const id = direct.id.replace("sb_", "sb-");
    const token = envdAccessToken(SECRET, direct.id, direct.token);
    // Wrong token first: the probe finds it, admission is refused, and it reads as unknown.
    const wrong = await call("/echo", { host: hostFor(id), headers: { "x-access-token": "1".repeat(64) } }, quiet);
    expect(await wrong.json()).toEqual({ code: 502, message: "sandbox was not found" });
    expect(listed(direct.id)).toBe(false); // the premise: the view had not listed it, so the probe answered
    const gets = () => n.requests.filter((e) => e.route === "get").length;
    const g0 = gets();
    const ok = await call("/echo", { host: hostFor(id), headers: { "x-access-token": token } }, quiet);
    expect(ok.status).toBe(200);
    const g1 = gets();
    expect(g1).toBeGreaterThan(g0);
    const again = await call("/echo", { host: hostFor(id), headers: { "x-access-token": token } }, quiet);
    expect(again.status).toBe(200);
    expect(gets()).toBe(g1);
    // A signed file URL never probes: an unpublished id stays unconfirmed without a token.
    const other = await new SandboxdClient({ baseUrl: n.url, token: ROOT }).claim({ template: "img:1", claim_ref: "team-a/elsewhere-2" });
    const g2 = gets();
    const signed = await call("/files?path=/x&signature=v1_abc", { host: hostFor(other.id.replace("sb_", "sb-")) }, quiet);
    expect(await signed.json()).toEqual({ code: 502, message: "sandbox was not found" });
    expect(gets()).toBe(g2);
    expect(listed(other.id)).toBe(false);
    await new SandboxdClient({ baseUrl: n.url, token: ROOT }).release(direct.id);
    await new SandboxdClient({ baseUrl: n.url, token: ROOT }).release(other.id);
  });
});
