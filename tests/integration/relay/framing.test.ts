// Issue 17 cases 1, 2 and parts of 10 through the real relay and e2b surface of sandbox-e2b (in process), against
// a guest that answers with framing attacks (framing-guest.ts). A violation ends that exchange only: before the
// response head the client gets the 502 envelope, after it a stream error; the process stays responsive (the next
// request is answered within a second). Before the fix the negative chunk size pinned the process in a loop.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { DOMAIN, KEY_A, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";
import { startFramingGuest, type FramingGuest } from "./framing-guest.ts";

// What "stays responsive" means: the next request answered within this, on a loaded 2-core machine.
const RESPONSIVE_MS = 1_000;

let s: Stack;
let guest: FramingGuest;
let sbx: Sandbox;
beforeAll(async () => {
  s = await startStack({ proxy: true });
  guest = await startFramingGuest();
  sbx = await Sandbox.create("base", sdkOpts(s));
  s.cluster.nodes[0]!.attachGuest(sbx.sandboxId.replace("sb-", "sb_"), 3000, guest.port);
});
afterAll(async () => {
  await sbx?.kill().catch(() => undefined);
  await guest?.stop();
  await s?.stop();
});

const token = () => (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
const relayed = (path: string, port = 3000, headers: Record<string, string> = {}) =>
  fetch(`${s.proxyUrl}${path}`, { headers: { host: `${port}-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": token(), ...headers } });

/** The relay and the REST API both answer at once after an attack. */
async function expectResponsive(): Promise<void> {
  const t0 = performance.now();
  const [ok, list] = await Promise.all([relayed("/ok"), fetch(`${s.apiUrl}/sandboxes`, { headers: { "x-api-key": KEY_A } })]);
  expect([ok.status, await ok.text(), list.status]).toEqual([200, "ok", 200]);
  await list.arrayBuffer();
  expect(performance.now() - t0).toBeLessThan(RESPONSIVE_MS);
}

/**
 * How a relayed exchange ended for the client: the whole body, or a reset (the head had not left the relay when
 * the stream failed: fetch rejects), or a stream error after the head.
 */
async function outcome(res: Promise<Response>): Promise<"complete" | "reset" | "stream error"> {
  return res.then(
    (r) => r.arrayBuffer().then(() => "complete" as const, () => "stream error" as const),
    () => "reset" as const,
  );
}

describe("the relay (case 1)", () => {
  test("a guest answering the chunked body `1\\r\\nZ\\r\\n-6\\r\\nQ`: the client's exchange is reset, the process stays responsive", async () => {
    expect(["reset", "stream error"]).toContain(await outcome(relayed("/negative-chunk")));
    await expectResponsive();
  });

  test.each([
    ["a negative Content-Length", "/negative-length"],
    ["status 99", "/status-99"],
    ["status 600", "/status-600"],
  ])("%s: a 502 envelope before any of the guest's head reaches the client", async (_what, path) => {
    const res = await relayed(path);
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({ code: 502, message: "sandbox unreachable" });
    await expectResponsive();
  });

  test.each([
    ["Content-Length not reached", "/short-body"],
    ["chunked not terminated", "/unterminated"],
  ])("a guest that closes mid-body (%s) is a reset or stream error, not a truncated success", async (_what, path) => {
    expect(["reset", "stream error"]).toContain(await outcome(relayed(path)));
  });
});

describe("the envd client of the e2b surface (case 2)", () => {
  test("envd answering /metrics with a negative chunk size: the API answers 500 and keeps serving", async () => {
    const claim = sbx.sandboxId.replace("sb-", "sb_");
    s.cluster.nodes[0]!.attachGuest(claim, 49983, guest.port);
    try {
      const t0 = performance.now();
      const r = await fetch(`${s.apiUrl}/sandboxes/${sbx.sandboxId}/metrics`, { headers: { "x-api-key": KEY_A } });
      expect(r.status).toBe(500);
      expect(await r.json()).toEqual({ code: 500, message: "failed to read sandbox metrics", error_code: "internal_server_error" });
      // Not the 2 s exchange deadline: the parser refused the size as it read it.
      expect(performance.now() - t0).toBeLessThan(RESPONSIVE_MS);
      await expectResponsive();
    } finally {
      s.cluster.nodes[0]!.detachGuest(claim, 49983);
    }
  });
});

describe("the envd client of the e2b surface (case 2): a fork child's /init", () => {
  test("envd answering /init with conflicting Content-Lengths fails the fork (500, children released) at once", async () => {
    const node = s.cluster.nodes[0]!;
    const releases = () => node.requests.filter((e) => e.route === "release").length;
    const r0 = releases();
    node.attachGuest("*", 49983, guest.port);
    try {
      const t0 = performance.now();
      const r = await fetch(`${s.apiUrl}/sandboxes/${sbx.sandboxId}/fork`, { method: "POST", headers: { "x-api-key": KEY_A, "content-type": "application/json" }, body: JSON.stringify({ count: 1 }) });
      expect(r.status).toBe(500);
      expect(await r.json()).toEqual({ code: 500, message: "failed to fork the sandbox", error_code: "internal_server_error" });
      // Not the 5 s /init budget: the reply was refused as it was read.
      expect(performance.now() - t0).toBeLessThan(RESPONSIVE_MS);
      expect(releases()).toBe(r0 + 1);
    } finally {
      node.attachGuest("*", 49983, s.guest.port);
    }
    await expectResponsive();
  });
});

describe("request headers and paths (case 10)", () => {
  test("headers named in Connection and Proxy-Authorization do not reach the guest", async () => {
    const r = await relayed("/echo", 3000, { connection: "x-hop", "x-hop": "secret", "proxy-authorization": "Basic dTpw", "x-kept": "1" });
    const head = ((await r.json()) as { head: string }).head.toLowerCase();
    expect(head).toContain("x-kept: 1");
    expect(head).not.toContain("x-hop");
    expect(head).not.toContain("proxy-authorization");
  });

  test("/%69nit is the envd-internal /init (404, nothing relayed); an undecodable escape is a 400 envelope", async () => {
    const before = guest.heads.length;
    const internal = await fetch(`${s.proxyUrl}/%69nit`, { method: "POST", headers: { host: `3000-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": token() } });
    expect(internal.status).toBe(404);
    // A malformed escape is refused at the listener's entry; a well-formed one that is not UTF-8 at the path guard.
    const bad = await relayed("/files/%zz");
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ code: 400, message: "malformed percent escape in the request path" });
    const notUtf8 = await relayed("/files/%ff");
    expect(notUtf8.status).toBe(400);
    expect(await notUtf8.json()).toEqual({ code: 400, message: "request path has an invalid percent-encoding" });
    expect(guest.heads.length).toBe(before);
  });
});

describe("request bodies to the e2b surface", () => {
  test("an endless chunked body is refused at the 1 MiB cap like a declared one, not buffered to its end", async () => {
    let pulled = 0;
    const chunk = new Uint8Array(64 * 1024).fill(0x20);
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        pulled += chunk.length;
        c.enqueue(chunk);
      },
    });
    const r = await fetch(`${s.apiUrl}/v2/sandboxes`, { method: "POST", headers: { "x-api-key": KEY_A, "content-type": "application/json" }, body, duplex: "half" } as RequestInit);
    expect(r.status).toBe(400);
    expect(((await r.json()) as { message: string }).message).toBe("invalid request body: larger than 1048576 bytes");
    expect(pulled).toBeLessThan(8 * 1024 * 1024);
    await expectResponsive();
  });
});
