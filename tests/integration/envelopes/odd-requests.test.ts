// Issue 17 case 8 and issue 22 case 5: every server the product runs answers the request shapes fetch cannot send
// (CONNECT, a bad Host, the absolute form, malformed escapes) with a 4xx and its JSON error envelope, and none of them
// ever serves Bun's development error page (source lines, file paths, the working directory). Sent over a raw socket
// to sandbox-e2b's REST surface and in-process relay, a simulated sandboxd node and the simulator's guest agent.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { createAdminHandler, serveAdmin } from "#services/sandboxd-sim/admin.ts";
import { startFakeGuest, type FakeGuest } from "#services/sandboxd-sim/guest.ts";
import { DOMAIN, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";
import { ASTERISK_FORMS, envelopeOf, leaks, oddRequests, rawRequest } from "./raw.ts";

let s: Stack;
let sandboxHost: string;
let guestAgentPort: number;
let fakeGuest: FakeGuest;
let admin: ReturnType<typeof Bun.serve>;
beforeAll(async () => {
  s = await startStack({ proxy: true, guestAgents: true });
  fakeGuest = await startFakeGuest({ accessToken: "t" });
  admin = serveAdmin("127.0.0.1", 0, createAdminHandler(() => s.cluster.nodes[0]));
  const sbx = await Sandbox.create("base", sdkOpts(s));
  sandboxHost = `49983-${sbx.sandboxId}.${DOMAIN}`;
  guestAgentPort = s.cluster.nodes[0]!.node.guestHost!.target(sbx.sandboxId.replace("sb-", "sb_"), 49983)!.port;
}, 60_000);
afterAll(async () => {
  await admin.stop(true);
  await fakeGuest.stop();
  await s.stop();
});

const port = (u: string | undefined) => Number(new URL(u!).port);

/** The {code, message} servers: the relay, the e2b surface, the guest agent (envd's own shape). */
function expectEnvelope(name: string, r: Awaited<ReturnType<typeof rawRequest>>): void {
  expect({ name, leaks: leaks(r.raw) }).toEqual({ name, leaks: [] });
  expect({ name, status: r.status >= 400 && r.status < 500 }).toEqual({ name, status: true });
  expect({ name, type: r.headers["content-type"] ?? "" }).toEqual({ name, type: expect.stringContaining("application/json") });
  expect({ name, code: envelopeOf(r.body)?.code }).toEqual({ name, code: r.status });
}

describe("the in-process relay (sandbox-e2b --envd-proxy-bind-address)", () => {
  for (const [name, head] of oddRequests("127.0.0.1")) {
    test(`${name}: a 4xx envelope, no development page`, async () => {
      expectEnvelope(name, await rawRequest(port(s.proxyUrl), `${head}\r\nConnection: close`));
    });
  }

  test("on a sandbox's host, CONNECT is a 405 envelope and a malformed escape a 400 envelope, before any owner lookup", async () => {
    const p = port(s.proxyUrl);
    const connect = await rawRequest(p, `CONNECT /x HTTP/1.1\r\nHost: ${sandboxHost}\r\nX-Access-Token: nope\r\nConnection: close`);
    expectEnvelope("CONNECT", connect);
    expect(connect.status).toBe(405);
    const bad = await rawRequest(p, `GET /files%zz HTTP/1.1\r\nHost: ${sandboxHost}\r\nX-Access-Token: nope\r\nConnection: close`);
    expectEnvelope("bad escape", bad);
    expect(bad.status).toBe(400);
    expect(envelopeOf(bad.body)?.message).toContain("percent");
  });

  test("/metrics on the public listener is answered like any path without a sandbox, with no series", async () => {
    const p = port(s.proxyUrl);
    const metrics = await rawRequest(p, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close");
    const other = await rawRequest(p, "GET /anything HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close");
    expectEnvelope("/metrics", metrics);
    expect(metrics.body).not.toContain("sandbox_envd_proxy_");
    expect([metrics.status, metrics.body]).toEqual([other.status, other.body]);
  });
});

describe("the e2b REST surface (sandbox-e2b --e2b-bind-address)", () => {
  for (const [name, head] of oddRequests("127.0.0.1")) {
    test(`${name}: a 4xx envelope, no development page`, async () => {
      expectEnvelope(name, await rawRequest(port(s.apiUrl), `${head}\r\nConnection: close`));
    });
  }
});

describe("the simulator's guest agent (envd-compatible)", () => {
  for (const [name, head] of oddRequests("127.0.0.1")) {
    test(`${name}: a 4xx envelope, no development page`, async () => {
      expectEnvelope(name, await rawRequest(guestAgentPort, `${head}\r\nConnection: close`));
    });
  }
});

describe("the simulator's fake envd guest (relay tests)", () => {
  for (const [name, head] of oddRequests("127.0.0.1")) {
    test(`${name}: a 4xx envelope, no development page`, async () => {
      expectEnvelope(name, await rawRequest(fakeGuest.port, `${head}\r\nConnection: close`));
    });
  }
});

describe("the simulator's --admin-listen listener (sandboxd's {error} body)", () => {
  for (const [name, head] of oddRequests("127.0.0.1")) {
    test(`${name}: a 4xx {error} body, no development page`, async () => {
      const r = await rawRequest(admin.port!, `${head.replace(/ \/(a|x)\b/, " /_sim/info")}\r\nConnection: close`);
      expect({ name, leaks: leaks(r.raw) }).toEqual({ name, leaks: [] });
      expect({ name, status: r.status >= 400 && r.status < 500 }).toEqual({ name, status: true });
      expect({ name, body: typeof (JSON.parse(r.body || "null") as { error?: unknown } | null)?.error }).toEqual({ name, body: "string" });
    });
  }
});

// sandboxd's contract (sandboxd.md §11): handled errors are `{"error": …}`, an unknown route is Go's plain-text
// "404 page not found"; the paths here are routes, so every answer is the JSON body.
const SIM_ODD: Array<[string, string]> = [
  ["CONNECT in authority form", "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443"],
  ["CONNECT in origin form", "CONNECT /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1"],
  ["an unparsable Host", "GET /v1/sandboxes HTTP/1.1\r\nHost: a b"],
  ["a Host with an unclosed IPv6 bracket", "GET /v1/sandboxes HTTP/1.1\r\nHost: [::1"],
  ["the absolute form naming another host", "GET http://elsewhere.example:99/v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1"],
  ["a malformed percent escape in the path", "GET /v1/sandboxes/%zz HTTP/1.1\r\nHost: 127.0.0.1"],
];
describe("a simulated sandboxd node (node:http, sandboxd's {error} body)", () => {
  for (const [name, head] of SIM_ODD) {
    test(`${name}: a 4xx {error} body, no development page`, async () => {
      const r = await rawRequest(port(s.cluster.nodes[0]!.url), `${head}\r\nConnection: close`);
      expect({ name, leaks: leaks(r.raw) }).toEqual({ name, leaks: [] });
      expect({ name, status: r.status >= 400 && r.status < 500 }).toEqual({ name, status: true });
      expect({ name, body: typeof (JSON.parse(r.body || "null") as { error?: unknown } | null)?.error }).toEqual({ name, body: "string" });
    });
  }
});

// Bun's HTTP parser (Bun.serve, and node:http under Bun) refuses the asterisk form (`OPTIONS *`, RFC 9112 §3.2.4)
// with a bodiless 400 before any handler runs, so no envelope can be attached there (docs/decisions.md "Error
// envelopes on every listener"); what we check is that it stays a 400 and never reaches a handler that could throw.
describe("the asterisk form on every listener", () => {
  for (const [name, head] of ASTERISK_FORMS) {
    test(`${name}: 400, nothing of the development page`, async () => {
      const listeners = [["relay", port(s.proxyUrl)], ["e2b", port(s.apiUrl)], ["guest agent", guestAgentPort], ["sandboxd node", port(s.cluster.nodes[0]!.url)]] as const;
      for (const [where, p] of listeners) {
        const r = await rawRequest(p, head);
        expect({ where, status: r.status, leaks: leaks(r.raw) }).toEqual({ where, status: 400, leaks: [] });
      }
    });
  }
});
