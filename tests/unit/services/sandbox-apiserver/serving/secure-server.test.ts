// The secure port's TLS front against real sockets in this process (issue 22 cases 1 and 5): nobody but the front
// reaches the internal listener, the verified certificate travels with the connection, identity header lines stay
// one value each, and heads the front will not forward are answered with a Kubernetes Status.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import net from "node:net";
import { dirname } from "node:path";
import tls from "node:tls";
import pino from "pino";
import { createCA, issueCertificate, selfSignedServingCert } from "#shared/tls/index.ts";
import { Authenticator, ClientCertVerifier, type PeerCert, parseCertBundle, startSecureServer } from "#services/sandbox-apiserver/serving/index.ts";
import { borrowIdentity, curlUnixAsNobody, rawOverUnix, tcpListenerInodes, tcpSockets, unixListeners } from "#tests/integration/sandbox-apiserver/internal-listener.ts";
import { parseResponses, rawExchange } from "#tests/integration/sandbox-apiserver/raw-http.ts";
import { waitFor } from "#tests/support/wait.ts";

const cfg = { allowedNames: ["front-proxy-client"], usernameHeaders: ["X-Remote-User"], groupHeaders: ["X-Remote-Group"], extraHeaderPrefixes: ["X-Remote-Extra-"] };
const MAX_BODY = 16 * 1024;

let server: Awaited<ReturnType<typeof startSecureServer>>;
let proxyCert: { certPem: string; keyPem: string };
let handled = 0;
/** The TCP listeners startSecureServer opened: this file runs in bun test's process, beside other files' servers. */
let ownListeners: Set<string>;

beforeAll(async () => {
  const [frontProxyCa, clientCa, serving] = await Promise.all([
    createCA("test-front-proxy-ca"),
    createCA("test-client-ca"),
    selfSignedServingCert({ cn: "localhost", dnsNames: ["localhost"], ips: ["127.0.0.1"] }),
  ]);
  proxyCert = await issueCertificate({ ca: frontProxyCa, cn: "front-proxy-client", usages: "client" });
  const authenticator = new Authenticator({ requestHeader: cfg, cacheTtlMs: 10_000 });
  const before = tcpListenerInodes(process.pid);
  server = await startSecureServer({
    bindAddress: "127.0.0.1",
    port: 0,
    certPem: serving.certPem,
    keyPem: serving.keyPem,
    verifier: new ClientCertVerifier(parseCertBundle(frontProxyCa.certPem), parseCertBundle(clientCa.certPem)),
    handler: async (req: Request, peer: PeerCert | undefined) => {
      handled++;
      const body = req.method === "POST" ? await req.text() : "";
      return Response.json({ auth: await authenticator.authenticate(req.headers, peer), path: new URL(req.url).pathname, body, headers: Object.fromEntries(req.headers) });
    },
    errorResponse: (code: number, message: string) => Response.json({ kind: "Status", apiVersion: "v1", status: "Failure", message, code }, { status: code }),
    maxBodyBytes: MAX_BODY,
    isIdentityHeader: (n: string) => authenticator.isIdentityHeader(n),
    log: pino({ level: "silent" }),
  });
  ownListeners = new Set([...tcpListenerInodes(process.pid)].filter((inode) => !before.has(inode)));
});

afterAll(async () => {
  await server?.stop();
});

/** Raw bytes over TLS (with the front proxy's certificate unless told otherwise), read until the server closes. */
const exchange = (raw: string, opts: { cert?: boolean } = {}) => rawExchange(server.port, raw, opts.cert === false ? undefined : proxyCert);

const aggregatorHead = "X-Remote-User: alice\r\nX-Remote-Group: team";

describe("issue 22 case 1: nobody but the TLS front reaches the internal listener", () => {
  test("a local process that borrows a live pipe's port (bound on 127.0.0.2) and sends plain HTTP gets no identity", async () => {
    // A connection authenticated by the front proxy's certificate, kept open: the aggregator's pooled connection.
    const held = tls.connect({ host: "127.0.0.1", port: server.port, rejectUnauthorized: false, cert: proxyCert.certPem, key: proxyCert.keyPem });
    let first = "";
    held.setEncoding("latin1");
    held.on("data", (d: string) => (first += d));
    held.once("secureConnect", () => held.write(`GET /held HTTP/1.1\r\nhost: x\r\n${aggregatorHead}\r\n\r\n`));
    await waitFor("the held connection's first answer", () => first.includes("\r\n\r\n"), 10_000);
    try {
      // What the server opened includes its secure port (the difference is taken right): the rest is what is attacked.
      expect(tcpSockets(process.pid).filter((s) => ownListeners.has(s.inode)).map((s) => s.local.port)).toContain(server.port);
      const attempts = await borrowIdentity(process.pid, server.port, "/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes", {
        "X-Remote-User": "mallory",
        "X-Remote-Group": "system:masters",
      }, ownListeners);
      for (const a of attempts) {
        expect(a.body).not.toContain("mallory");
        expect(a.status).not.toBe(200);
      }
    } finally {
      held.destroy();
    }
  });

  test("the internal listener is a Unix socket in a 0700 directory: another user cannot connect, and a connection without the front's secret is refused", async () => {
    expect(unixListeners(process.pid)).toContain(server.internalSocket);
    const dir = statSync(dirname(server.internalSocket));
    expect(dir.mode & 0o777).toBe(0o700);
    expect(dir.uid).toBe(process.getuid!());
    // curl exit 7: could not connect (permission denied on the directory).
    expect(await curlUnixAsNobody(server.internalSocket)).toBe(7);

    // This user (root bypasses the directory's mode) still gets nothing without a connection secret the front made.
    const before = handled;
    const raw = await rawOverUnix(
      server.internalSocket,
      "GET /x HTTP/1.1\r\nhost: x\r\nX-Remote-User: mallory\r\nX-Remote-Group: system:masters\r\n" +
        "x-sandbox-apiserver-connection: guessed\r\nconnection: close\r\n\r\n",
    );
    const [answer] = parseResponses(raw);
    expect(answer?.status).toBe(403);
    expect(JSON.parse(answer!.body)).toMatchObject({ kind: "Status", code: 403 });
    expect(handled).toBe(before);
  });

  test("a client's own copy of the connection header is dropped: the request keeps its connection's identity", async () => {
    const [a] = await exchange(
      `GET /x HTTP/1.1\r\nhost: x\r\nx-sandbox-apiserver-connection: forged\r\nx-sandbox-apiserver-refused: 200 ok\r\n${aggregatorHead}\r\nconnection: close\r\n\r\n`,
    );
    expect(a?.status).toBe(200);
    const body = JSON.parse(a!.body) as { auth: { user: { name: string } }; headers: Record<string, string> };
    expect(body.auth.user.name).toBe("alice");
    expect(body.headers["x-sandbox-apiserver-connection"]).toBeUndefined();
    expect(body.headers["x-sandbox-apiserver-refused"]).toBeUndefined();
  });
});

describe("issue 22 case 5: identity headers as kube-apiserver sends them", () => {
  test("every group header line is one group, commas included; extras likewise", async () => {
    const [a] = await exchange(
      "GET /x HTTP/1.1\r\nhost: x\r\nX-Remote-User: alice\r\nX-Remote-Group: team,system:masters\r\nX-Remote-Group: dev\r\n" +
        "X-Remote-Extra-Scopes: a,b\r\nX-Remote-Extra-Scopes: c\r\nconnection: close\r\n\r\n",
    );
    const { auth } = JSON.parse(a!.body) as { auth: { user: { groups: string[]; extra: Record<string, string[]> } } };
    expect(auth.user.groups).toEqual(["team,system:masters", "dev", "system:authenticated"]);
    expect(auth.user.extra).toEqual({ scopes: ["a,b", "c"] });
  });

  test("a forwarded system:anonymous stays anonymous: system:unauthenticated, never system:authenticated", async () => {
    const [a] = await exchange("GET /x HTTP/1.1\r\nhost: x\r\nX-Remote-User: system:anonymous\r\nX-Remote-Group: system:authenticated\r\nconnection: close\r\n\r\n");
    const { auth } = JSON.parse(a!.body) as { auth: { user: { name: string; groups: string[] } } };
    expect(auth.user).toEqual({ name: "system:anonymous", groups: ["system:unauthenticated"] });
  });

  test("pipelined requests each carry their connection's identity; a chunked body that looks like a request stays a body", async () => {
    const smuggled = "GET /smuggled HTTP/1.1\r\nX-Remote-User: eve\r\nX-Remote-Group: system:masters\r\n\r\n";
    const chunked = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
    const answers = await exchange(
      `POST /first HTTP/1.1\r\nhost: x\r\n${aggregatorHead}\r\ntransfer-encoding: chunked\r\n\r\n${chunked}` +
        `GET /second HTTP/1.1\r\nhost: x\r\n${aggregatorHead}\r\nconnection: close\r\n\r\n`,
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    const [first, second] = answers.map((a) => JSON.parse(a.body) as { path: string; body: string; auth: { user: { name: string } } });
    expect(first).toMatchObject({ path: "/first", body: smuggled, auth: { user: { name: "alice" } } });
    expect(second).toMatchObject({ path: "/second", auth: { user: { name: "alice" } } });
  });
});

describe("issue 22 case 5: what the front will not forward is answered with a Status, never Bun's own page", () => {
  const cases: [string, string, number][] = [
    ["OPTIONS *", "OPTIONS * HTTP/1.1\r\nhost: x\r\n\r\n", 400],
    ["CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n", 405],
    ["a declared body over the cap", `POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: ${MAX_BODY + 1}\r\n\r\n`, 413],
    ["a head over 15 KiB", `GET /x HTTP/1.1\r\nhost: x\r\nx-big: ${"b".repeat(16 * 1024)}\r\n\r\n`, 431],
    ["conflicting Content-Length", "POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab", 400],
    ["Content-Length with Transfer-Encoding", "POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n", 400],
    ["a bare LF inside the head", "GET /x HTTP/1.1\r\nhost: x\nX-Remote-Group: a,b\r\n\r\n", 400],
  ];
  for (const [what, raw, code] of cases) {
    test(`${what}: ${code} Status, then the connection closes`, async () => {
      const before = handled;
      const answers = await exchange(raw, { cert: false });
      expect(answers).toHaveLength(1);
      expect(answers[0]!.status).toBe(code);
      expect(answers[0]!.headers["content-type"]).toStartWith("application/json");
      expect(JSON.parse(answers[0]!.body)).toMatchObject({ kind: "Status", status: "Failure", code });
      expect(handled).toBe(before);
    });
  }

  test("a request after a refused one on the same connection is dropped unanswered", async () => {
    const answers = await exchange(`OPTIONS * HTTP/1.1\r\nhost: x\r\n\r\nGET /after HTTP/1.1\r\nhost: x\r\n${aggregatorHead}\r\n\r\n`);
    expect(answers.map((a) => a.status)).toEqual([400]);
  });

  test("a body at the cap passes whole", async () => {
    const body = "z".repeat(MAX_BODY);
    const [a] = await exchange(`POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`, { cert: false });
    expect(a?.status).toBe(200);
    expect((JSON.parse(a!.body) as { body: string }).body).toHaveLength(MAX_BODY);
  });
});

describe("slowloris guards on the secure port (docs/decisions.md secure-front-deadlines)", () => {
  test("half a head and a handshake that never happens are both closed after their deadlines", async () => {
    const serving = await selfSignedServingCert({ cn: "localhost", ips: ["127.0.0.1"] });
    const guarded = await startSecureServer({
      bindAddress: "127.0.0.1",
      port: 0,
      certPem: serving.certPem,
      keyPem: serving.keyPem,
      verifier: new ClientCertVerifier([], []),
      handler: () => new Response("ok"),
      errorResponse: (code: number, message: string) => Response.json({ message, code }, { status: code }),
      maxBodyBytes: MAX_BODY,
      isIdentityHeader: () => false,
      headerTimeoutMs: 1000,
      handshakeTimeoutMs: 1000,
      log: pino({ level: "silent" }),
    });
    try {
      let halfClosed = false;
      const half = tls.connect({ host: "127.0.0.1", port: guarded.port, rejectUnauthorized: false }, () => half.write("GET /apis HTTP/1.1\r\nhost: x\r\n"));
      half.on("close", () => (halfClosed = true));
      half.on("error", () => {});
      let rawClosed = false;
      const raw = net.connect(guarded.port, "127.0.0.1");
      raw.on("close", () => (rawClosed = true));
      raw.on("error", () => {});
      await waitFor("both slow connections to be closed", () => halfClosed && rawClosed, 8_000, 50);
    } finally {
      await guarded.stop();
    }
  });
});
