// Scenarios 9, 10 and 45 over a real TLS socket: the certificate the kubelet API serves, the protocol floor, and the
// routes as a client sees them. The routes are served unguarded here (the handler is the app itself): who may call
// them is kubelet-api-auth.test.ts's subject, against a real kube-apiserver.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createKubeletApp,
  kubeletTlsPair,
  NOT_IMPLEMENTED,
  serveKubeletApi,
  type KubeletServer,
} from "#services/vk-sandbox/kubelet-api/index.ts";
import { selfSignedServingCert } from "#shared/tls/index.ts";
import { peer } from "./tls-peer.ts";
import { run } from "#tests/support/run.ts";

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
