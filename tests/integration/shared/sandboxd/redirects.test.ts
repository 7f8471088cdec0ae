// shared/sandboxd/client.ts following claim redirects across a simulated mesh of three sandboxd nodes.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { SandboxdConflict, SandboxdNotFound, SandboxdRedirect, isCapacity } from "#shared/sandboxd/errors.ts";
import { startSimCluster, type SandboxdSim, type SimCluster } from "#services/sandboxd-sim/sim.ts";

const ROOT = "mesh-root-token";
const KEY = "base:24.04/none/small";
const req = (ref: string) => ({ template: "base:24.04", claim_ref: ref, ttl_seconds: 600 });

let cluster: SimCluster;
let n0: SandboxdSim, n1: SandboxdSim, n2: SandboxdSim;
let origin: SandboxdClient;

beforeAll(async () => {
  cluster = await startSimCluster(3, { rootToken: ROOT, seed: 11 });
  [n0, n1, n2] = cluster.nodes as [SandboxdSim, SandboxdSim, SandboxdSim];
  origin = new SandboxdClient({ baseUrl: n0.url, token: ROOT, retry: { baseDelayMs: 1, maxDelayMs: 5 } });
});
afterAll(async () => {
  await cluster.stop();
});
afterEach(async () => {
  for (const n of cluster.nodes) {
    n.forceRedirect(null);
    n.clearFaults();
    n.undrain();
    n.setTokens(ROOT);
    const c = new SandboxdClient({ baseUrl: n.url, token: ROOT });
    for (const x of n.claims()) await c.release(x.id);
    n.log.clear();
  }
});

const claimBodies = (n: SandboxdSim) => n.log.find("claim").map((e) => e.body);

describe("claim redirects", () => {
  test("a warm miss is followed to a warm peer with the identical body and no_redirect", async () => {
    n0.setWarm(KEY, 0);
    n1.setWarm(KEY, 2);
    n2.setWarm(KEY, 0);
    const r = await origin.claim({ ...req("ns/follow"), metadata: { a: "b" } });
    expect(r.owner_addr).toBe(n1.addr);
    expect(n1.claims().map((c) => c.id)).toEqual([r.id]);
    expect(n0.claims()).toEqual([]);
    expect(claimBodies(n1)).toEqual([{ ...req("ns/follow"), metadata: { a: "b" }, no_redirect: true }]);
  });

  test("require_promoted from the redirect is carried into the replay", async () => {
    n1.setWarm(KEY, 1);
    const parent = await new SandboxdClient({ baseUrl: n1.url, token: ROOT }).claim(req("ns/builder"));
    await new SandboxdClient({ baseUrl: n1.url, token: ROOT }).promote(parent.id, { template: "proj:v1" });
    n1.log.clear();
    const r = await origin.claim({ template: "proj:v1", claim_ref: "ns/clone" });
    expect(r.owner_addr).toBe(n1.addr);
    expect(claimBodies(n1)).toEqual([{ template: "proj:v1", claim_ref: "ns/clone", no_redirect: true, require_promoted: true }]);
  });

  test("an undelivered answer moves on to the next target in order", async () => {
    n1.drain();
    n2.setWarm(KEY, 1);
    n0.forceRedirect([n1.addr, n2.addr]);
    const r = await origin.claim(req("ns/next"));
    expect(r.owner_addr).toBe(n2.addr);
    expect(n1.log.find("claim")[0]?.outcome).toBe(429);
  });

  test("exhausting every target is a capacity miss and claims nothing anywhere", async () => {
    n1.drain();
    n2.drain();
    n0.forceRedirect([n1.addr, n2.addr]);
    const e = (await origin.claim(req("ns/none")).catch((x) => x)) as SandboxdRedirect;
    expect(e).toBeInstanceOf(SandboxdRedirect);
    expect(e.exhausted).toBe(true);
    expect(isCapacity(e)).toBe(true);
    expect(cluster.nodes.every((n) => n.claims().length === 0)).toBe(true);
  });

  test("a target that does not know our token sends the claim back to the origin, served locally", async () => {
    n0.setWarm(KEY, 1);
    n1.setTokens("rotated-token");
    n0.forceRedirect([n1.addr, n2.addr]);
    const r = await origin.claim(req("ns/rotated"));
    expect(r.owner_addr).toBe(n0.addr);
    expect(n2.log.find("claim")).toEqual([]);
    expect(claimBodies(n0)).toEqual([req("ns/rotated"), { ...req("ns/rotated"), no_redirect: true }]);
  });

  test("any other error at a target stops the walk", async () => {
    n0.forceRedirect([n1.addr, n2.addr]);
    n1.fail("claim", 409, { error: "egress not attached" });
    expect(await origin.claim(req("ns/stop")).catch((x) => x)).toBeInstanceOf(SandboxdConflict);
    expect(n2.log.find("claim")).toEqual([]);
  });

  test("a require_promoted miss at the target is the node's 404, not a retry elsewhere", async () => {
    n0.forceRedirect([n1.addr, n2.addr], true);
    expect(await origin.claim(req("ns/promoted-miss")).catch((x) => x)).toBeInstanceOf(SandboxdNotFound);
    expect(n2.log.find("claim")).toEqual([]);
  });

  test("with followRedirects:false the caller gets the targets and nothing is replayed", async () => {
    n0.forceRedirect([n2.addr]);
    const e = (await origin.claim(req("ns/manual"), { followRedirects: false }).catch((x) => x)) as SandboxdRedirect;
    expect(e.targets).toEqual([n2.addr]);
    expect(e.exhausted).toBe(false);
    expect(n2.log.find("claim")).toEqual([]);
  });

  test("a template delete on a mesh hands back the holders; no_redirect deletes locally only", async () => {
    n1.setWarm(KEY, 1);
    const at1 = new SandboxdClient({ baseUrl: n1.url, token: ROOT });
    const src = await at1.claim(req("ns/tpl"));
    await at1.promote(src.id, { template: "proj:del" });
    expect(await origin.deleteTemplate({ template: "proj:del" })).toEqual({ redirect: [n1.addr] });
    expect(await origin.deleteTemplate({ template: "proj:del" }, { noRedirect: true })).toBe("already-gone");
    expect(await at1.deleteTemplate({ template: "proj:del" }, { noRedirect: true })).toBe("deleted");
  });
});
