// Public user ports (issue 20 part 3, docs/envd-relay.md "Public ports"), through sandbox-e2b's in-process proxy
// with the stock JS SDK creating the sandboxes: as on e2b cloud, a user port is served with no token unless the
// sandbox was created with network.allowPublicTraffic: false (then its trafficAccessToken must come as the
// e2b-traffic-access-token header); envd's port keeps its access token; --forbid-public-traffic turns it all off.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { waitFor } from "#tests/support/wait.ts";
import { DOMAIN, KEY_A, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";

const USER_PORT = 3000;
const tokenOf = (sbx: Sandbox) => (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
const trafficOf = (sbx: Sandbox) => (sbx as unknown as { trafficAccessToken?: string }).trafficAccessToken;

async function withStack(flags: string[]): Promise<Stack> {
  const s = await startStack({ proxy: true, extraFlags: flags });
  for (const n of s.cluster.nodes) n.attachGuest("*", USER_PORT, s.guest.port);
  return s;
}

function call(s: Stack, id: string, port: number, headers: Record<string, string> = {}, path = "/app") {
  return fetch(`${s.proxyUrl}${path}`, { headers: { host: `${port}-${id}.${DOMAIN}`, ...headers } });
}

/** POST /sandboxes as the SDK sends it, read raw (the SDK hides an absent field and a null alike). */
async function createRaw(s: Stack, body: Record<string, unknown>): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${s.apiUrl}/sandboxes`, { method: "POST", headers: { "x-api-key": KEY_A, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base", ...body }) });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

describe("e2b cloud's policy (the default flags)", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await withStack([]);
  });
  afterAll(async () => {
    await s?.stop();
  });

  test("a sandbox created without network is public: its user port answers with no token, envd's still needs its token", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    try {
      expect(trafficOf(sbx)).toBeUndefined();
      const before = s.guest.requests.length;
      const open = await call(s, sbx.sandboxId, USER_PORT);
      expect(open.status).toBe(200); // the test guest's answer: the request reached the sandbox
      expect(s.guest.requests.slice(before).map((r) => r.path)).toEqual(["/app"]);
      const envd = await call(s, sbx.sandboxId, 49983, {}, "/files?path=x");
      expect(await envd.json()).toEqual({ code: 401, message: "missing X-Access-Token" });
      // The SDK's host form for the port is the one the proxy routes.
      expect(sbx.getHost(USER_PORT)).toBe(`${USER_PORT}-${sbx.sandboxId}.${DOMAIN}`);
    } finally {
      await sbx.kill();
    }
  });

  test("allowPublicTraffic: false: the reply carries a trafficAccessToken; no token or a wrong one is 401, the right header is relayed", async () => {
    const sbx = await Sandbox.create("base", { ...sdkOpts(s), network: { allowPublicTraffic: false } });
    try {
      const traffic = trafficOf(sbx);
      expect(traffic).toMatch(/^[0-9a-f]{64}$/);
      const before = s.guest.requests.length;
      const none = await call(s, sbx.sandboxId, USER_PORT);
      expect(none.status).toBe(401);
      expect(((await none.json()) as { message: string }).message).toContain("e2b-traffic-access-token");
      const wrong = await call(s, sbx.sandboxId, USER_PORT, { "e2b-traffic-access-token": "0".repeat(64) });
      expect(await wrong.json()).toEqual({ code: 401, message: "invalid traffic access token" });
      const junk = await call(s, sbx.sandboxId, USER_PORT, { "e2b-traffic-access-token": "not-a-token" });
      expect(junk.status).toBe(401);
      expect(s.guest.requests.length).toBe(before); // nothing reached the sandbox
      const right = await call(s, sbx.sandboxId, USER_PORT, { "e2b-traffic-access-token": traffic! });
      expect(right.status).toBe(200);
      expect(s.guest.requests.slice(before).map((r) => r.path)).toEqual(["/app"]);
      // The envd access token still opens a user port; the traffic token never opens envd's.
      expect((await call(s, sbx.sandboxId, USER_PORT, { "x-access-token": tokenOf(sbx) })).status).toBe(200);
      const envd = await call(s, sbx.sandboxId, 49983, { "e2b-traffic-access-token": traffic! }, "/files?path=x");
      expect(await envd.json()).toEqual({ code: 401, message: "missing X-Access-Token" });
      // Sandbox.connect keeps the token: the SDK takes the connect reply's, and a code interpreter's /contexts calls
      // send only the traffic token.
      const again = await Sandbox.connect(sbx.sandboxId, sdkOpts(s));
      expect(trafficOf(again)).toBe(traffic);
    } finally {
      await sbx.kill();
    }
  });

  test("the choice is stamped on the claim but never shown, and a caller cannot forge the stamp", async () => {
    const sbx = await Sandbox.create("base", { ...sdkOpts(s), metadata: { mine: "1" }, network: { allowPublicTraffic: false } });
    try {
      expect((await sbx.getInfo()).metadata).toEqual({ mine: "1" });
      // A list shows a new sandbox once the fleet view has polled its node (read-your-writes is issue 20 part 2).
      const listed = await waitFor("the new sandbox in the list", async () => (await Sandbox.list(sdkOpts(s)).nextItems()).find((x) => x.sandboxId === sbx.sandboxId));
      expect(listed.metadata).toEqual({ mine: "1" });
    } finally {
      await sbx.kill();
    }
    const forged = await createRaw(s, { metadata: { "vk-sandbox.public-traffic": "true" } });
    expect(forged.status).toBe(400);
    expect(String(forged.json.message)).toContain("reserved");
  });

  test("the raw reply: trafficAccessToken only when the ports are not public; other network rules are a 400 naming them", async () => {
    const pub = await createRaw(s, { network: { allowPublicTraffic: true } });
    expect(pub.status).toBe(201);
    expect(pub.json.trafficAccessToken).toBeUndefined();
    const priv = await createRaw(s, { network: { allowPublicTraffic: false } });
    expect(priv.status).toBe(201);
    expect(priv.json.trafficAccessToken).toMatch(/^[0-9a-f]{64}$/);
    for (const id of [pub.json.sandboxID, priv.json.sandboxID]) await Sandbox.kill(String(id), sdkOpts(s));
    const rules = await createRaw(s, { network: { allowOut: ["1.1.1.1"] } });
    expect(rules.status).toBe(400);
    expect(String(rules.json.message)).toContain("network.allowOut (an egress allow list) is not supported");
  });
});

describe("--public-traffic-default=false", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await withStack(["--public-traffic-default=false"]);
  });
  afterAll(async () => {
    await s?.stop();
  });

  test("a create that does not say is private (and gets its token); one asking allowPublicTraffic: true is public", async () => {
    const quiet = await Sandbox.create("base", sdkOpts(s));
    const open = await Sandbox.create("base", { ...sdkOpts(s), network: { allowPublicTraffic: true } });
    try {
      expect(trafficOf(quiet)).toMatch(/^[0-9a-f]{64}$/);
      expect((await call(s, quiet.sandboxId, USER_PORT)).status).toBe(401);
      expect((await call(s, quiet.sandboxId, USER_PORT, { "e2b-traffic-access-token": trafficOf(quiet)! })).status).toBe(200);
      expect(trafficOf(open)).toBeUndefined();
      expect((await call(s, open.sandboxId, USER_PORT)).status).toBe(200);
    } finally {
      await quiet.kill();
      await open.kill();
    }
  });
});

describe("--forbid-public-traffic (the behaviour before issue 20)", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await withStack(["--forbid-public-traffic"]);
  });
  afterAll(async () => {
    await s?.stop();
  });

  test("no port is public; allowPublicTraffic: true is refused with the flag named", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    try {
      expect((await call(s, sbx.sandboxId, USER_PORT)).status).toBe(401);
      expect((await call(s, sbx.sandboxId, USER_PORT, { "x-access-token": tokenOf(sbx) })).status).toBe(200);
      expect((await call(s, sbx.sandboxId, USER_PORT, { "e2b-traffic-access-token": trafficOf(sbx)! })).status).toBe(200);
    } finally {
      await sbx.kill();
    }
    const asked = await createRaw(s, { network: { allowPublicTraffic: true } });
    expect(asked.status).toBe(400);
    expect(String(asked.json.message)).toContain("--forbid-public-traffic");
  });
});
