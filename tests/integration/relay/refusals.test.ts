// What the relay does with credentials and with a node's refusals, observed at the node and the guest:
//  - a wrong X-Access-Token is never upgraded to a passive (root token) relay by adding a `signature` parameter;
//  - a node's 404 on the ports relay (the sandbox was released elsewhere) drops the cached owner, so the next
//    request reads the owner again instead of opening another doomed tunnel;
//  - a node's 401 on the ports relay is answered as a 401, not as an unreachable sandbox.
// sandbox-e2b's in-process relay on one simulated sandboxd node (development substrate) and the test guest.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { DOMAIN, ROOT, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";
import { fileSignature } from "#shared/sandboxd/urls.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ proxy: true });
});
afterAll(() => s.stop());

const node = () => s.cluster.nodes[0]!;
const tokenOf = (sbx: Sandbox) => (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
const claimId = (sbx: Sandbox) => sbx.sandboxId.replace(/^sb-/, "sb_");
const hostFor = (id: string, port = 49983) => `${port}-${id}.${DOMAIN}`;
const calls = (route: string) => node().requests.filter((e) => e.route === route).length;
const call = (path: string, host: string, headers: Record<string, string> = {}, method = "GET") =>
  fetch(`${s.proxyUrl}${path}`, { method, headers: { host, ...headers } });

describe("credentials", () => {
  test("a wrong X-Access-Token with a signature parameter is refused 401; nothing is relayed, with the root token or any", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    try {
      await sbx.files.write("/home/user/secret.txt", "tenant data");
      // A real signature for the path, so only the wrong header stands between the caller and the file.
      const sig = fileSignature({ path: "/home/user/secret.txt", operation: "read", user: "user", accessToken: tokenOf(sbx) });
      const q = `/files?path=/home/user/secret.txt&username=user&signature=${encodeURIComponent(sig)}`;
      const ports = calls("ports");
      const seen = s.guest.requests.length;
      for (const method of ["GET", "POST"]) {
        const r = await call(q, hostFor(sbx.sandboxId), { "x-access-token": "0".repeat(64) }, method);
        expect([method, r.status]).toEqual([method, 401]);
        const text = await r.text();
        expect(JSON.parse(text)).toEqual({ code: 401, message: "invalid sandbox access token" });
        expect(text).not.toContain("tenant data");
      }
      expect(calls("ports")).toBe(ports);
      expect(s.guest.requests.length).toBe(seen);
    } finally {
      await sbx.kill();
    }
  });
});

describe("node refusals", () => {
  test("a node's 404 for a cached owner (released elsewhere) => 502, and the next request reads the owner again instead of tunnelling", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    const host = hostFor(sbx.sandboxId);
    const headers = { "x-access-token": tokenOf(sbx) };
    expect((await call("/health", host, headers)).status).toBe(204); // the owner is cached
    // Another replica (or the node itself) released it: the cache still names its node and token.
    await new SandboxdClient({ baseUrl: node().url, token: ROOT }).release(claimId(sbx));
    const p0 = calls("ports");
    const refused = await call("/health", host, headers);
    expect(await refused.json()).toEqual({ code: 502, message: "sandbox was not found" });
    expect(calls("ports")).toBe(p0 + 1);
    const again = await call("/health", host, headers);
    expect(await again.json()).toEqual({ code: 502, message: "sandbox was not found" });
    // Dropped from the cache: no second tunnel to a node that already said the sandbox is gone.
    expect(calls("ports")).toBe(p0 + 1);
  });

  test("a node's 401 on the ports relay is answered 401 invalid sandbox access token, not 502", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    try {
      node().fail("ports", 401, { error: "unauthorized" }, 1, claimId(sbx));
      const r = await call("/health", hostFor(sbx.sandboxId), { "x-access-token": tokenOf(sbx) });
      expect(r.status).toBe(401);
      expect(await r.json()).toEqual({ code: 401, message: "invalid sandbox access token" });
      // The refusal was one-off: the same credentials work on the next request.
      expect((await call("/health", hostFor(sbx.sandboxId), { "x-access-token": tokenOf(sbx) })).status).toBe(204);
    } finally {
      node().clearFaults();
      await sbx.kill();
    }
  });
});
