// --requestheader-allowed-names on the real TLS front and request path (issue 31): a front-proxy client certificate
// counts only when its CN is one of the allowed names exactly. A CN that extends an allowed name, or that an allowed
// name extends, is a failed credential: 401 before any route runs, and its identity headers are not believed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Hono } from "hono";
import pino from "pino";
import { createCA, issueCertificate, selfSignedServingCert } from "#shared/tls/index.ts";
import { createApp } from "#services/sandbox-apiserver/app.ts";
import type { ApiBindings } from "#services/sandbox-apiserver/api/index.ts";
import { ApiserverMetrics, Authenticator, Authorizer, ClientCertVerifier, parseCertBundle, startSecureServer } from "#services/sandbox-apiserver/serving/index.ts";
import { rawExchange } from "#tests/integration/sandbox-apiserver/raw-http.ts";

const requestHeader = { allowedNames: ["front-proxy-client"], usernameHeaders: ["X-Remote-User"], groupHeaders: ["X-Remote-Group"], extraHeaderPrefixes: ["X-Remote-Extra-"] };
const PATH = "/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes";

let server: Awaited<ReturnType<typeof startSecureServer>>;
let frontProxyCa: Awaited<ReturnType<typeof createCA>>;
const callers: string[] = [];

beforeAll(async () => {
  const [ca, clientCa, serving] = await Promise.all([
    createCA("test-front-proxy-ca"),
    createCA("test-client-ca"),
    selfSignedServingCert({ cn: "localhost", dnsNames: ["localhost"], ips: ["127.0.0.1"] }),
  ]);
  frontProxyCa = ca;
  const authenticator = new Authenticator({ requestHeader, cacheTtlMs: 10_000 });
  const api = new Hono<{ Bindings: ApiBindings }>().get(PATH, (c) => {
    callers.push(c.env?.caller?.name ?? "");
    return c.json({ caller: c.env?.caller ?? null });
  });
  server = await startSecureServer({
    bindAddress: "127.0.0.1",
    port: 0,
    certPem: serving.certPem,
    keyPem: serving.keyPem,
    verifier: new ClientCertVerifier(parseCertBundle(frontProxyCa.certPem), parseCertBundle(clientCa.certPem)),
    // The server's own request path: authenticate (401), authorize (system:masters passes without a review), route.
    handler: createApp({
      authenticator,
      authorizer: new Authorizer({ alwaysAllowPaths: [], allowedTtlMs: 10_000, deniedTtlMs: 10_000 }),
      api,
      observability: new Hono(),
      metrics: new ApiserverMetrics(),
      log: pino({ level: "silent" }),
    }),
    errorResponse: (code: number, message: string) => Response.json({ kind: "Status", apiVersion: "v1", status: "Failure", message, code }, { status: code }),
    maxBodyBytes: 16 * 1024,
    isIdentityHeader: (n: string) => authenticator.isIdentityHeader(n),
    log: pino({ level: "silent" }),
  });
});

afterAll(async () => {
  await server?.stop();
});

/** A GET claiming to be mallory in system:masters, over TLS with a front-proxy-CA certificate of CN `cn`. */
async function asFrontProxy(cn: string) {
  const cert = await issueCertificate({ ca: frontProxyCa, cn, usages: "client" });
  const [answer] = await rawExchange(server.port, `GET ${PATH} HTTP/1.1\r\nhost: x\r\nX-Remote-User: mallory\r\nX-Remote-Group: system:masters\r\nconnection: close\r\n\r\n`, cert);
  return answer!;
}

describe("front-proxy client certificate names", () => {
  test("control: the allowed CN's identity headers are believed (mallory in system:masters reaches the route)", async () => {
    const a = await asFrontProxy("front-proxy-client");
    expect(a.status).toBe(200);
    expect(JSON.parse(a.body)).toEqual({ caller: expect.objectContaining({ name: "mallory", groups: expect.arrayContaining(["system:masters"]) }) });
  });

  for (const cn of ["front-proxy-client-x", "front-proxy-clientx", "front-proxy-clien", "xfront-proxy-client"]) {
    test(`CN ${JSON.stringify(cn)} (allowed: "front-proxy-client") is a 401 Status; no route runs as mallory`, async () => {
      const before = callers.length;
      const a = await asFrontProxy(cn);
      expect(a.status).toBe(401);
      expect(JSON.parse(a.body)).toMatchObject({ kind: "Status", code: 401, reason: "Unauthorized" });
      expect(a.body).not.toContain("mallory");
      expect(callers.length).toBe(before);
    });
  }
});
