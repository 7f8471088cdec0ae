// Scenarios 9, 10 and 45 over a real TLS socket: the certificate the kubelet API serves, the protocol floor, and the
// routes as a client sees them. The routes are served unguarded here (the handler is the app itself): who may call
// them is kubelet-api-auth.test.ts's subject, against a real kube-apiserver.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import {
  createKubeletApp,
  kubeletBindHost,
  kubeletTlsPair,
  MAX_BODY_BYTES,
  NOT_IMPLEMENTED,
  serveKubeletApi,
  type KubeletServer,
} from "#services/vk-sandbox/kubelet-api/index.ts";
import { createCA, issueCertificate, selfSignedServingCert } from "#shared/tls/index.ts";
import { curlUnixAsNobody, rawOverUnix, unixListeners } from "#tests/integration/sandbox-apiserver/internal-listener.ts";
import { peer } from "./tls-peer.ts";
import { run } from "#tests/support/run.ts";
import { freePorts } from "../../kube/ports.ts";

const dir = mkdtempSync(join(tmpdir(), "kubelet-api-"));
const servers: KubeletServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  rmSync(dir, { recursive: true, force: true });
});

const app = createKubeletApp({
  listPods: () => [{ metadata: { name: "p", namespace: "ns" } }],
  runningPods: () => [],
});

async function serve(input: { nodeName: string; nodeIp?: string; tlsCert?: string; tlsKey?: string }) {
  const pair = await kubeletTlsPair(input);
  const s = await serveKubeletApi({ handler: (req) => app.fetch(req), tls: pair, hostname: "127.0.0.1", port: 0 });
  servers.push(s);
  return { s, pair };
}

/** openssl s_client with one protocol version forced; resolves with whether a session was established. */
async function opensslHandshake(port: number, flag: "-tls1_1" | "-tls1_2"): Promise<{ ok: boolean; out: string }> {
  // SECLEVEL=0 so the client side is willing to speak TLS 1.1 at all: the refusal must come from the server.
  const r = await run(["openssl", "s_client", "-connect", `127.0.0.1:${port}`, flag, "-cipher", "DEFAULT:@SECLEVEL=0", "-brief"], { stdin: "", timeoutMs: 5000 });
  const { code } = r;
  const text = r.stdout + r.stderr;
  return { ok: code === 0 && /Protocol version: TLSv1\.[23]|CONNECTION ESTABLISHED/.test(text), out: text };
}

// The openssl CLI is a second, independent TLS peer; where it is not installed the node:tls test below still proves scenario 10.
const hasOpenssl = Bun.which("openssl") !== null;

describe("kubelet API TLS", () => {
  test("scenario 9: with no cert files a self-signed cert names the node, the node IP and 127.0.0.1", async () => {
    const { s, pair } = await serve({ nodeName: "vk-node-a", nodeIp: "10.1.2.3" });
    expect(pair.source).toBe("self-signed");
    const { cert } = await peer(s.port);
    expect(cert.subject.CN).toBe("vk-sandbox");
    const sans = (cert.subjectaltname ?? "").split(", ").sort();
    expect(sans).toEqual(["DNS:vk-node-a", "IP Address:10.1.2.3", "IP Address:127.0.0.1"].sort());
  });

  test("scenario 9: a node name that parses as an IP becomes an IP SAN", async () => {
    const { s } = await serve({ nodeName: "192.168.7.7" });
    const { cert } = await peer(s.port);
    expect((cert.subjectaltname ?? "").split(", ").sort()).toEqual(["IP Address:127.0.0.1", "IP Address:192.168.7.7"]);
  });

  test("scenario 9: a mismatched cert/key pair is refused (fatal at startup)", async () => {
    const a = await selfSignedServingCert({ cn: "a" });
    const b = await selfSignedServingCert({ cn: "b" });
    writeFileSync(join(dir, "a.crt"), a.certPem);
    writeFileSync(join(dir, "b.key"), b.keyPem);
    await expect(kubeletTlsPair({ nodeName: "n", tlsCert: join(dir, "a.crt"), tlsKey: join(dir, "b.key") })).rejects.toThrow(
      /does not match/,
    );
  });

  test("a given matching pair is the one served", async () => {
    const given = await selfSignedServingCert({ cn: "given", dnsNames: ["given.example"] });
    writeFileSync(join(dir, "g.crt"), given.certPem);
    writeFileSync(join(dir, "g.key"), given.keyPem);
    const { s, pair } = await serve({ nodeName: "n", tlsCert: join(dir, "g.crt"), tlsKey: join(dir, "g.key") });
    expect(pair.source).toBe("files");
    expect((await peer(s.port)).cert.subject.CN).toBe("given");
  });

  test("only one of the two files set falls back to self-signing", async () => {
    const pair = await kubeletTlsPair({ nodeName: "n", tlsCert: join(dir, "g.crt") });
    expect(pair.source).toBe("self-signed");
  });

  test.skipIf(!hasOpenssl)("scenario 10: TLS 1.1 fails and TLS 1.2 succeeds without a client certificate (openssl)", async () => {
    const { s } = await serve({ nodeName: "n" });
    const old = await opensslHandshake(s.port, "-tls1_1");
    expect(old.ok).toBe(false);
    expect(old.out).toMatch(/protocol version|no protocols available|unsupported protocol|wrong version/i);
    const ok = await opensslHandshake(s.port, "-tls1_2");
    expect(ok.ok).toBe(true);
  });

  test("scenario 10: node:tls capped at TLS 1.1 is refused; TLS 1.2 without a client cert is served", async () => {
    const { s } = await serve({ nodeName: "n" });
    await expect(peer(s.port, { minVersion: "TLSv1", maxVersion: "TLSv1.1", ciphers: "DEFAULT:@SECLEVEL=0" })).rejects.toThrow();
    const r = await peer(s.port, { minVersion: "TLSv1.2", maxVersion: "TLSv1.2" });
    expect(r.protocol).toBe("TLSv1.2");
    const res = await fetch(`https://127.0.0.1:${s.port}/pods`, { tls: { rejectUnauthorized: false } });
    expect(res.status).toBe(200);
  });
});

describe("kubelet API routes over TLS (scenario 45)", () => {
  test("pods, runningpods, stats, metrics, logs, an unknown path and a wrong method", async () => {
    const { s } = await serve({ nodeName: "n" });
    const at = (p: string, init: RequestInit = {}) =>
      fetch(`https://127.0.0.1:${s.port}${p}`, { ...init, redirect: "manual", tls: { rejectUnauthorized: false } });
    const pods = await at("/pods");
    expect(pods.status).toBe(200);
    expect(((await pods.json()) as any).kind).toBe("PodList");
    const running = await at("/runningpods/");
    expect(((await running.json()) as any).items).toEqual([]);
    expect(await (await at("/stats/summary")).json()).toEqual({ node: { nodeName: "", startTime: null }, pods: null });
    const metrics = await at("/metrics/resource");
    expect(metrics.headers.get("content-type")).toBe("text/plain; version=0.0.4");
    const logs = await at("/containerLogs/ns/p/c");
    expect(logs.status).toBe(500);
    expect(await logs.text()).toContain(NOT_IMPLEMENTED);
    const nope = await at("/nope");
    expect(nope.status).toBe(404);
    expect(await nope.text()).toBe("404 request not found");
    expect((await at("/pods", { method: "POST" })).status).toBe(405);
  });
});

describe("kubelet API transport: the client certificate reaches the handler, bad input gets a plain 4xx", () => {
  /** A server whose handler reports the peer it was given (and throws on /boom), with a client CA. */
  async function peerEcho() {
    const ca = await createCA("kubelet-test-client-ca");
    const pair = await kubeletTlsPair({ nodeName: "n" });
    const s = await serveKubeletApi({
      handler: (req, p) => {
        const path = new URL(req.url).pathname;
        if (path === "/boom") throw new Error("handler failed at /tmp/secret/path.ts:12");
        return Response.json({ path, peer: p ?? null });
      },
      tls: pair,
      clientCaPem: ca.certPem,
      hostname: "127.0.0.1",
      port: 0,
    });
    servers.push(s);
    return { s, ca };
  }

  /** Raw bytes over TLS; resolves with everything the server wrote before it closed (or 3 s passed). */
  function raw(port: number, text: string): Promise<string> {
    return new Promise((resolve) => {
      let out = "";
      const sock = tlsConnect({ port, host: "127.0.0.1", rejectUnauthorized: false }, () => sock.write(text));
      const done = () => resolve(out);
      sock.on("data", (d) => (out += d));
      sock.on("close", done);
      sock.on("error", done);
      setTimeout(() => (sock.destroy(), done()), 3000);
    });
  }

  test("a verified certificate arrives as CN and O; another CA's as unverified; none as no peer", async () => {
    const { s, ca } = await peerEcho();
    const good = await issueCertificate({ ca, cn: "kube-apiserver-kubelet-client", organizations: ["system:masters", "ops"], usages: "client" });
    const other = await issueCertificate({ ca: await createCA("other"), cn: "mallory", usages: "client" });
    const at = (c?: { certPem: string; keyPem: string }) =>
      fetch(`https://127.0.0.1:${s.port}/pods`, { tls: { rejectUnauthorized: false, ...(c ? { cert: c.certPem, key: c.keyPem } : {}) } }).then((r) => r.json());
    expect(await at(good)).toEqual({ path: "/pods", peer: { verified: true, commonName: "kube-apiserver-kubelet-client", organizations: ["system:masters", "ops"] } });
    expect(((await at(other)) as { peer: { verified: boolean } }).peer.verified).toBe(false);
    expect(await at()).toEqual({ path: "/pods", peer: null });
  });

  test("a server certificate (no clientAuth usage) from the client CA is not a verified client", async () => {
    const { s, ca } = await peerEcho();
    const server = await issueCertificate({ ca, cn: "a-server", usages: "server" });
    const r = await fetch(`https://127.0.0.1:${s.port}/pods`, { tls: { rejectUnauthorized: false, cert: server.certPem, key: server.keyPem } });
    expect(((await r.json()) as { peer: { verified: boolean } }).peer.verified).toBe(false);
  });

  test("keep-alive: two requests on one connection are both answered", async () => {
    const { s } = await peerEcho();
    const out = await raw(s.port, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect(out.match(/HTTP\/1\.1 200/g)).toHaveLength(2);
    expect(out).toContain('"path":"/a"');
    expect(out).toContain('"path":"/b"');
  });

  test("CONNECT is 405, an unparsable request 400, a bad % escape routes as a path: plain text, no stack", async () => {
    const { s } = await peerEcho();
    const connect = await raw(s.port, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    expect(connect).toStartWith("HTTP/1.1 405");
    expect(connect).toContain("CONNECT is not supported");
    const garbage = await raw(s.port, "NOT HTTP AT ALL\r\n\r\n");
    expect(garbage).toStartWith("HTTP/1.1 400");
    const pct = await raw(s.port, "GET /pods%zz%E0%A4%A HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect(pct).toStartWith("HTTP/1.1 200");
    expect(pct).toContain('"path":"/pods%zz%E0%A4%A"');
  });

  test("a Host that makes no URL with the target is a plain 400, not a handler's 500 (Go's server answers 400 too)", async () => {
    const { s } = await peerEcho();
    const bad = await raw(s.port, "GET /pods HTTP/1.1\r\nHost: evil/pods#\r\nConnection: close\r\n\r\n");
    expect(bad).toStartWith("HTTP/1.1 400");
    expect(bad).toContain("the request target and Host do not form a valid URL\n");
  });

  test("a handler that throws is a plain 500 without the error's text; a body over the cap is 413", async () => {
    const { s } = await peerEcho();
    const boom = await fetch(`https://127.0.0.1:${s.port}/boom`, { tls: { rejectUnauthorized: false } });
    expect(boom.status).toBe(500);
    const text = await boom.text();
    expect(text).toBe("internal error\n");
    const big = await fetch(`https://127.0.0.1:${s.port}/exec/ns/p/c`, { method: "POST", body: "x".repeat(MAX_BODY_BYTES + 1), tls: { rejectUnauthorized: false } });
    expect(big.status).toBe(413);
  });
});

describe("kubelet API bind address (issue 22: bound to --node-ip when set)", () => {
  const reachable = (host: string, port: number) =>
    new Promise<boolean>((resolve) => {
      const sock = tlsConnect({ host, port, rejectUnauthorized: false }, () => (sock.destroy(), resolve(true)));
      sock.on("error", () => resolve(false));
    });

  test("--listen-addr without a host and --node-ip 127.0.0.1: 127.0.0.1 answers, 127.0.0.2 does not", async () => {
    const port = freePorts(1)[0]!;
    const s = await serveKubeletApi({ handler: (req) => app.fetch(req), tls: await kubeletTlsPair({ nodeName: "n" }), hostname: kubeletBindHost(`:${port}`, "127.0.0.1"), port });
    servers.push(s);
    expect(await reachable("127.0.0.1", port)).toBe(true);
    expect(await reachable("127.0.0.2", port)).toBe(false);
  });

  test("without --node-ip every interface answers, as before", async () => {
    const port = freePorts(1)[0]!;
    const s = await serveKubeletApi({ handler: (req) => app.fetch(req), tls: await kubeletTlsPair({ nodeName: "n" }), hostname: kubeletBindHost(`:${port}`, undefined), port });
    servers.push(s);
    expect(await reachable("127.0.0.2", port)).toBe(true);
  });
});

describe("kubelet API behind the shared TLS front (Bun.serve on a 0700 Unix socket)", () => {
  test("only the front reaches the routes: another user cannot connect, and this user without a connection secret gets 403", async () => {
    const s = await serveKubeletApi({ handler: (req) => app.fetch(req), tls: await kubeletTlsPair({ nodeName: "n" }), hostname: "127.0.0.1", port: 0 });
    servers.push(s);
    expect(unixListeners(process.pid)).toContain(s.internalSocket);
    expect(statSync(dirname(s.internalSocket)).mode & 0o777).toBe(0o700);
    expect(await curlUnixAsNobody(s.internalSocket)).toBe(7);
    const raw = await rawOverUnix(s.internalSocket, "GET /pods HTTP/1.1\r\nhost: x\r\nx-vk-sandbox-kubelet-connection: guessed\r\nconnection: close\r\n\r\n");
    expect(raw).toStartWith("HTTP/1.1 403");
    expect(raw).not.toContain("PodList");
    // Through the front, the same route answers.
    const ok = await fetch(`https://127.0.0.1:${s.port}/pods`, { tls: { rejectUnauthorized: false } });
    expect(ok.status).toBe(200);
  });
});
