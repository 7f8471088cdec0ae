// SandboxdClient against scripted stub nodes: addressing, the auth header, request shapes of the verbs and reads,
// and which calls the safe-retry rule repeats (call.ts). Claim rules: claim.test.ts; URLs: urls.test.ts.
import { beforeAll, describe, expect, test } from "bun:test";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { SandboxdConflict, SandboxdRouteNotFound } from "#shared/sandboxd/errors.ts";
import { type StubNode, client, stubNodes } from "./stub-node.ts";

const stubs = stubNodes();
let a!: StubNode;
beforeAll(() => void (a = stubs.a));

describe("addressing and auth", () => {
  test("baseUrlFor prefixes http:// only when the address has no scheme", () => {
    expect(SandboxdClient.baseUrlFor("10.0.0.5:7777")).toBe("http://10.0.0.5:7777");
    expect(SandboxdClient.baseUrlFor("https://node-a.example.com/")).toBe("https://node-a.example.com");
  });

  test("an empty token sends no Authorization header; a release can carry the claim's own token", async () => {
    a.handle = () => new Response(null, { status: 204 });
    await client(a, "").hibernate("sb_0123456789abcdef");
    await client(a).release("sb_0123456789abcdef", { token: "claimtok" });
    expect(a.seen.map((s) => s.auth)).toEqual([null, "Bearer claimtok"]);
  });

  test("lifecycle verbs that take a body token send an empty one (operator path)", async () => {
    a.handle = () => Response.json({ children: [] });
    await client(a).fork("sb_0123456789abcdef", { count: 2, claim_ref_prefix: "ns/" });
    expect(a.seen[0]?.body).toEqual({ count: 2, claim_ref_prefix: "ns/", token: "" });
  });

  test("list encodes claim_ref, repeated metadata pairs and tenant", async () => {
    a.handle = () => Response.json({ sandboxes: [] });
    await client(a).list({ claimRef: "ns/x", metadata: { b: "2", a: "1" }, tenant: "acme" });
    expect(a.seen[0]?.query).toBe("?claim_ref=ns%2Fx&metadata=a%3D1&metadata=b%3D2&tenant=acme");
  });
});

describe("safe retries", () => {
  test("an idempotent verb is retried after a 503 and succeeds", async () => {
    let n = 0;
    a.handle = () => (++n === 1 ? Response.json({ error: "tenant db down" }, { status: 503 }) : new Response(null, { status: 204 }));
    await client(a).wake("sb_0123456789abcdef");
    expect(n).toBe(2);
  });

  test("a 409 is not retried", async () => {
    a.handle = () => Response.json({ error: "sandbox is archived" }, { status: 409 });
    expect(await client(a).renew("sb_0123456789abcdef", 60).catch((e) => e)).toBeInstanceOf(SandboxdConflict);
    expect(a.seen.length).toBe(1);
  });

  test("a fork is never repeated after a 502 (it may have created children)", async () => {
    a.handle = () => new Response("bad gateway", { status: 502 });
    await client(a).fork("sb_0123456789abcdef", { count: 1 }).catch(() => {});
    expect(a.seen.length).toBe(1);
  });

  test("a router 404 on release is not 'already gone'", async () => {
    a.handle = () => new Response("404 page not found\n", { status: 404 });
    expect(await client(a).release("sb_0123456789abcdef").catch((e) => e)).toBeInstanceOf(SandboxdRouteNotFound);
  });
});
