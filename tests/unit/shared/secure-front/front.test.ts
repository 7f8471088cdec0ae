// The shared TLS front on its own, with a peer type of the test's choosing: whatever the `peer` callback says about a
// connection reaches the handler of every request on that connection and no other; a callback that throws closes the
// connection unanswered (fail closed); a silent connection is closed after idleTimeoutMs; what the front answers
// itself is the caller's renderer, a handler's throw included (without the error's text); stop() removes the
// internal socket's directory.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, statSync } from "node:fs";
import { dirname } from "node:path";
import tls from "node:tls";
import { type SecureFront, startSecureFront } from "#shared/secure-front/index.ts";
import { selfSignedServingCert } from "#shared/tls/index.ts";
import { rawExchange } from "#tests/integration/sandbox-apiserver/raw-http.ts";
import { waitFor } from "#tests/support/wait.ts";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
let front: SecureFront;
let handled = 0;
let connections = 0;

beforeAll(async () => {
  const serving = await selfSignedServingCert({ cn: "localhost", ips: ["127.0.0.1"] });
  front = await startSecureFront<{ connection: number; sni: string | false | null }>({
    name: "front-test",
    bindAddress: "127.0.0.1",
    port: 0,
    tls: { cert: serving.certPem, key: serving.keyPem },
    peer(sock) {
      if (sock.servername === "refuse.test") throw new Error("no verdict for this connection");
      return { connection: ++connections, sni: sock.servername };
    },
    handler(req, peer) {
      handled++;
      const path = URL.canParse(req.url) ? new URL(req.url).pathname : req.url;
      if (path === "/boom") throw new Error("failed at /srv/secret/handler.ts:12");
      if (path === "/host") return Response.json({ host: new URL(req.url).host });
      return Response.json({ path, peer, forged: req.headers.get("x-front-test-connection") });
    },
    errorResponse: (code, message) => new Response(`rendered ${code}: ${message}`, { status: code }),
    internalErrorMessage: "internal error",
    maxBodyBytes: 1024,
    idleTimeoutMs: 300,
    log: quiet,
  });
});

afterAll(async () => {
  await front?.stop();
});

const exchange = (raw: string) => rawExchange(front.port, raw);

describe("shared secure front", () => {
  test("each connection's peer verdict reaches every request on it, and only on it", async () => {
    const a = await exchange("GET /1 HTTP/1.1\r\nhost: x\r\n\r\nGET /2 HTTP/1.1\r\nhost: x\r\nx-front-test-connection: forged\r\nconnection: close\r\n\r\n");
    const b = await exchange("GET /3 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    const [a1, a2] = a.map((r) => JSON.parse(r.body) as { path: string; peer: { connection: number }; forged: string | null });
    const [b1] = b.map((r) => JSON.parse(r.body) as { peer: { connection: number } });
    expect(a1!.peer.connection).toBe(a2!.peer.connection);
    expect(b1!.peer.connection).not.toBe(a1!.peer.connection);
    // A client's own copy of the internal header never reaches the handler.
    expect(a2!.forged).toBeNull();
  });

  test("a peer callback that throws closes the connection without an answer", async () => {
    const before = handled;
    const got = await new Promise<string>((resolve) => {
      let out = "";
      const sock = tls.connect({ host: "127.0.0.1", port: front.port, servername: "refuse.test", rejectUnauthorized: false }, () =>
        sock.write("GET /x HTTP/1.1\r\nhost: x\r\n\r\n"),
      );
      sock.on("data", (d) => (out += d));
      sock.on("close", () => resolve(out));
      sock.on("error", () => resolve(out));
    });
    expect(got).toBe("");
    expect(handled).toBe(before);
  });

  test("a Host that makes no URL with the target is the renderer's 400, before the handler", async () => {
    const before = handled;
    for (const host of ["evil/pods#", "x:1/../y", "a b"]) {
      const [r] = await exchange(`GET /host HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`);
      expect({ host, status: r?.status, body: r?.body }).toEqual({ host, status: 400, body: "rendered 400: the request target and Host do not form a valid URL" });
    }
    expect(handled).toBe(before);
    const [ok] = await exchange("GET /host HTTP/1.1\r\nhost: kubelet.example:10250\r\nconnection: close\r\n\r\n");
    expect(JSON.parse(ok!.body)).toEqual({ host: "kubelet.example:10250" });
  });

  test("a silent connection is closed after idleTimeoutMs", async () => {
    let closed = false;
    const sock = tls.connect({ host: "127.0.0.1", port: front.port, rejectUnauthorized: false });
    sock.on("close", () => (closed = true));
    sock.on("error", () => {});
    await waitFor("the idle connection to close", () => closed, 10_000);
    expect(closed).toBe(true);
  });

  test("refusals and a handler's throw are the caller's renderer; the error's text stays in the process", async () => {
    const [connect] = await exchange("CONNECT example.com:443 HTTP/1.1\r\nhost: example.com\r\n\r\n");
    expect(connect).toMatchObject({ status: 405, body: "rendered 405: CONNECT is not supported" });
    const [big] = await exchange("POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 1025\r\n\r\n");
    expect(big!.status).toBe(413);
    const [boom] = await exchange("GET /boom HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    expect(boom).toMatchObject({ status: 500, body: "rendered 500: internal error" });
  });

  test("the internal socket lives in a 0700 directory that stop() removes", async () => {
    const serving = await selfSignedServingCert({ cn: "localhost", ips: ["127.0.0.1"] });
    const other = await startSecureFront({
      name: "front-test-stop",
      bindAddress: "127.0.0.1",
      port: 0,
      tls: { cert: serving.certPem, key: serving.keyPem },
      peer: () => undefined,
      handler: () => new Response("ok"),
      errorResponse: (code, message) => new Response(message, { status: code }),
      maxBodyBytes: 1024,
      log: quiet,
    });
    const dir = dirname(other.internalSocket);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    await other.stop();
    expect(existsSync(dir)).toBe(false);
  });

  test("a front name that cannot make a header name is refused before anything listens", async () => {
    await expect(
      startSecureFront({
        name: "Bad Name",
        bindAddress: "127.0.0.1",
        port: 0,
        tls: {},
        peer: () => undefined,
        handler: () => new Response("ok"),
        errorResponse: (code, message) => new Response(message, { status: code }),
        maxBodyBytes: 1,
        log: quiet,
      }),
    ).rejects.toThrow(/lower-case letters/);
  });
});
