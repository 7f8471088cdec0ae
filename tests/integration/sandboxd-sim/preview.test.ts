// POST /v1/sandboxes/{id}/preview on the simulator (sandboxd.md §5.6, §2.2): node-level header auth plus the
// sandbox's own token in the body (no operator path), a signed URL clamped to the lease, 501 without a listener.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { DEFAULT_PREVIEW_ADVERTISE } from "#services/sandboxd-sim/preview.ts";
import { PreviewReply } from "#shared/sandboxd/schemas.ts";
import { KEY, ROOT, call, claim } from "./helpers.ts";

const TENANT = "tenant-token-acme";
let sim: SandboxdSim;

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, tenants: { acme: { token: TENANT, max_claims: 0 } }, clock: "fake", seed: 11 });
  sim.setWarm(KEY, 16);
});
afterAll(async () => {
  await sim.stop();
});
beforeEach(() => {
  sim.clearFaults();
  sim.setPreview(DEFAULT_PREVIEW_ADVERTISE);
});

const preview = (id: string, body: unknown, token: string | null = ROOT) => call(sim, "POST", `/v1/sandboxes/${id}/preview`, { token, body });

describe("preview (sandboxd.md §5.6)", () => {
  test("mints a signed URL on the preview listener naming the sandbox, the port and the owner", async () => {
    const c = (await claim(sim, { ttl_seconds: 600 })).json;
    const r = await preview(c.id, { token: c.token, port: 8080, ttl_seconds: 60 });
    expect(r.status).toBe(200);
    expect(PreviewReply.parse(r.json)).toEqual({ url: r.json.url });
    expect(r.json.url).toMatch(new RegExp(`^http://${DEFAULT_PREVIEW_ADVERTISE.replace(/\./g, "\\.")}/p/[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+/$`));
    expect(sim.previewOf(r.json.url)).toEqual({ sandboxId: c.id, port: 8080, owner: sim.addr, expiresAt: sim.clock.now() + 60_000 });
  });

  test("the URL's life is clamped to the claim's lease; ttl_seconds 0 asks for an hour", async () => {
    const c = (await claim(sim, { ttl_seconds: 120 })).json;
    const deadline = Date.parse(c.deadline);
    const long = await preview(c.id, { token: c.token, port: 3000, ttl_seconds: 86_400 });
    expect(sim.previewOf(long.json.url)?.expiresAt).toBe(deadline);
    const dflt = await preview(c.id, { token: c.token, port: 3000, ttl_seconds: 0 });
    expect(sim.previewOf(dflt.json.url)?.expiresAt).toBe(deadline);
    const longLease = (await claim(sim, { ttl_seconds: 7_200 })).json;
    const hour = await preview(longLease.id, { token: longLease.token, port: 3000 });
    expect(sim.previewOf(hour.json.url)?.expiresAt).toBe(sim.clock.now() + 3_600_000);
  });

  test("an archived claim kept forever has no lease: the requested lifetime stands unclamped", async () => {
    const c = (await claim(sim, { ttl_seconds: 60 })).json;
    sim.archive(c.id);
    const r = await preview(c.id, { token: c.token, port: 80, ttl_seconds: 86_400 });
    expect(sim.previewOf(r.json.url)?.expiresAt).toBe(sim.clock.now() + 86_400_000);
  });

  test("the header takes root or a tenant token; a missing or unknown one is 401 invalid api token", async () => {
    const c = (await claim(sim)).json;
    expect((await preview(c.id, { token: c.token, port: 80 }, TENANT)).status).toBe(200);
    for (const bad of [null, "nope"]) {
      const r = await preview(c.id, { token: c.token, port: 80 }, bad);
      expect([r.status, r.json]).toEqual([401, { error: "invalid api token" }]);
    }
    // The sandbox's own token is not a node credential.
    expect((await preview(c.id, { token: c.token, port: 80 }, c.token)).status).toBe(401);
  });

  test("the body token is always required: root with an empty one, a wrong one and an unknown id are the same 404", async () => {
    const c = (await claim(sim)).json;
    const cases = [
      preview(c.id, { token: "", port: 80 }),
      preview(c.id, { port: 80 }),
      preview(c.id, { token: "0".repeat(32), port: 80 }),
      preview("sb_0000000000000000", { token: c.token, port: 80 }),
    ];
    for (const r of await Promise.all(cases)) expect([r.status, r.json]).toEqual([404, { error: "unknown sandbox" }]);
  });

  test("a port outside 1-65535 or an undecodable body is 400; unknown fields are ignored", async () => {
    const c = (await claim(sim)).json;
    for (const port of [0, 65_536]) {
      const r = await preview(c.id, { token: c.token, port });
      expect([r.status, r.json]).toEqual([400, { error: "port must be 1-65535" }]);
    }
    const junk = await call(sim, "POST", `/v1/sandboxes/${c.id}/preview`, { raw: "{not json" });
    expect([junk.status, junk.json]).toEqual([400, { error: "invalid request body" }]);
    expect((await preview(c.id, { token: c.token, port: 80, extra: true })).status).toBe(200);
  });

  test("a node without a preview listener answers 501 (knob setPreview(null), or the option at start)", async () => {
    const c = (await claim(sim)).json;
    sim.setPreview(null);
    const r = await preview(c.id, { token: c.token, port: 80 });
    expect([r.status, r.json]).toEqual([501, { error: "preview listener not configured" }]);
    const bare = await startSandboxdSim({ rootToken: ROOT, previewAdvertise: null, seed: 12 });
    try {
      const bc = (await claim(bare)).json;
      expect((await call(bare, "POST", `/v1/sandboxes/${bc.id}/preview`, { body: { token: bc.token, port: 80 } })).status).toBe(501);
    } finally {
      await bare.stop();
    }
  });

  test("setPreview names the listener; a URL minted by another node does not read back here", async () => {
    const c = (await claim(sim)).json;
    sim.setPreview("10.0.0.5:7778");
    const r = await preview(c.id, { token: c.token, port: 80 });
    expect(r.json.url.startsWith("http://10.0.0.5:7778/p/")).toBe(true);
    const other = await startSandboxdSim({ rootToken: ROOT, seed: 13 });
    try {
      expect(other.previewOf(r.json.url)).toBeNull();
    } finally {
      await other.stop();
    }
  });

  test("the route is a logged, fault-injectable route like the others", async () => {
    const c = (await claim(sim)).json;
    sim.fail("preview", 503);
    expect((await preview(c.id, { token: c.token, port: 80 })).status).toBe(503);
    const logged = sim.log.find("preview").at(-1);
    expect(logged).toMatchObject({ method: "POST", auth: "root", outcome: 503 });
  });
});
