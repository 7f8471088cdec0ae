// SandboxdClient.preview / previewUrl against the simulator (sandboxd.md §5.6): the wire shape sent, the URL
// returned, and the typed errors (404 body token, 401 header, 501 no listener — not retried).
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { SandboxdNotFound, SandboxdServerError, SandboxdUnauthorized } from "#shared/sandboxd/errors.ts";
import { DEFAULT_PREVIEW_ADVERTISE } from "#services/sandboxd-sim/preview.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";

const ROOT = "root-token-0123";
const fast = { baseDelayMs: 1, maxDelayMs: 5 };
let sim: SandboxdSim;
let root: SandboxdClient;

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, seed: 21, pools: ["base:24.04=4"] });
  root = new SandboxdClient({ baseUrl: sim.url, token: ROOT, retry: fast });
});
afterAll(async () => {
  await sim.stop();
});
afterEach(() => {
  sim.clearFaults();
  sim.setPreview(DEFAULT_PREVIEW_ADVERTISE);
});

describe("preview", () => {
  test("preview sends the root token in the header and the sandbox token, port and ttl in the body", async () => {
    const c = await root.claim({ template: "base:24.04", claim_ref: "ns/p1", ttl_seconds: 600 });
    const r = await root.preview(c.id, { token: c.token, port: 8080, ttl_seconds: 30 });
    expect(sim.previewOf(r.url)).toMatchObject({ sandboxId: c.id, port: 8080, owner: sim.addr });
    const sent = sim.log.find("preview").at(-1);
    expect(sent).toMatchObject({ auth: "root", body: { token: c.token, port: 8080, ttl_seconds: 30 } });
  });

  test("previewUrl is the URL of a preview, minted on the owner and clamped to the lease", async () => {
    const c = await root.claim({ template: "base:24.04", claim_ref: "ns/p2", ttl_seconds: 60 });
    const url = await root.previewUrl(c.id, c.token, 3000, { ttlSeconds: 3_600 });
    expect(url.startsWith(`http://${DEFAULT_PREVIEW_ADVERTISE}/p/`)).toBe(true);
    // Whole seconds, rounded down: a URL never outlives the lease.
    expect(sim.previewOf(url)?.expiresAt).toBe(Math.floor(Date.parse(c.deadline) / 1000) * 1000);
    expect(sim.log.find("preview").at(-1)?.body).toEqual({ token: c.token, port: 3000, ttl_seconds: 3_600 });
  });

  test("a wrong body token is a handled 404; a bad node token is 401", async () => {
    const c = await root.claim({ template: "base:24.04", claim_ref: "ns/p3" });
    expect(root.previewUrl(c.id, "0".repeat(32), 80)).rejects.toBeInstanceOf(SandboxdNotFound);
    const stranger = new SandboxdClient({ baseUrl: sim.url, token: "nope", retry: fast });
    expect(stranger.previewUrl(c.id, c.token, 80)).rejects.toBeInstanceOf(SandboxdUnauthorized);
  });

  test("a node without a preview listener is a 501 server error, asked once (not retried)", async () => {
    const c = await root.claim({ template: "base:24.04", claim_ref: "ns/p4" });
    sim.setPreview(null);
    const before = sim.log.find("preview").length;
    const e = await root.previewUrl(c.id, c.token, 80).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(SandboxdServerError);
    expect((e as SandboxdServerError).status).toBe(501);
    expect(sim.log.find("preview").length).toBe(before + 1);
  });

  test("a 503 while minting is retried: minting changes no node state", async () => {
    const c = await root.claim({ template: "base:24.04", claim_ref: "ns/p5" });
    sim.fail("preview", 503);
    expect(await root.previewUrl(c.id, c.token, 80)).toContain("/p/");
    expect(sim.log.find("preview").map((x) => x.outcome).slice(-2)).toEqual([503, 200]);
  });
});
