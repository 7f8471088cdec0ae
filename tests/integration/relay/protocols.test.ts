// The relay's protocol legs: TLS with ALPN h2 toward clients (scenario 18), and cleartext HTTP/2 by prior knowledge
// toward the guest with --envd-proxy-guest-http2 (scenario 19).
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import http2 from "node:http2";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { selfSignedServingCert } from "#shared/tls/index.ts";
import { DOMAIN, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";

const stacks: Stack[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const s of stacks) await s.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function h2get(url: string, headers: Record<string, string>, o: http2.SecureClientSessionOptions = {}): Promise<{ status: number; body: string; alpn: string | false | undefined }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url, o);
    session.once("error", reject);
    const st = session.request({ ":path": "/echo", ...headers });
    let status = 0;
    let body = "";
    st.on("response", (h) => (status = Number(h[":status"])));
    st.on("data", (c) => (body += c));
    st.on("end", () => {
      const alpn = (session.socket as { alpnProtocol?: string | false }).alpnProtocol;
      session.close();
      resolve({ status, body, alpn });
    });
    st.on("error", reject);
  });
}

test("18: a client over TLS negotiates h2 and is answered over HTTP/2; the guest sees HTTP/1.1", async () => {
  const cert = await selfSignedServingCert({ cn: `*.${DOMAIN}`, dnsNames: [`*.${DOMAIN}`, DOMAIN], ips: ["127.0.0.1"] });
  const dir = mkdtempSync(join(tmpdir(), "relay-tls-"));
  dirs.push(dir);
  writeFileSync(join(dir, "tls.crt"), cert.certPem);
  writeFileSync(join(dir, "tls.key"), cert.keyPem);
  const tls = await startStack({ proxy: true, extraFlags: [`--envd-proxy-tls-cert-file=${join(dir, "tls.crt")}`, `--envd-proxy-tls-private-key-file=${join(dir, "tls.key")}`] });
  stacks.push(tls);
  const sbx = await Sandbox.create("base", { ...sdkOpts(tls), sandboxUrl: undefined } as never);
  const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  const port = new URL(tls.proxyUrl!).port;
  const r = await h2get(`https://127.0.0.1:${port}`, { ":authority": `49983-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": token }, { ca: cert.certPem, servername: `49983-${sbx.sandboxId}.${DOMAIN}` });
  expect(r.alpn).toBe("h2");
  expect(r.status).toBe(200);
  const seen = JSON.parse(r.body);
  expect(seen.headers.host).toBe(`49983-${sbx.sandboxId}.${DOMAIN}`);
  expect(seen.headers["x-forwarded-proto"]).toBe("https");
  expect(seen.headers.connection).toBe("close"); // node:http's HTTP/1.1 toward the guest
  // HTTP/1.1 over TLS still works (ALPN fallback).
  const h1 = await fetch(`https://127.0.0.1:${port}/echo`, { headers: { host: `49983-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": token }, tls: { ca: cert.certPem } } as RequestInit);
  expect(h1.status).toBe(200);
  await sbx.kill();
});

test("19: --envd-proxy-guest-http2 speaks h2c prior knowledge to the guest, authority {port}-{id}.{domain}", async () => {
  // An h2c-only guest (node:http2 cleartext server) attached to the sandbox's port 49983.
  const seen: { version: string; authority: string | undefined; token: string | undefined }[] = [];
  const server = http2.createServer((req, res) => {
    seen.push({ version: req.httpVersion, authority: req.headers[":authority"] as string | undefined, token: req.headers["x-access-token"] as string | undefined });
    if (req.url === "/init") {
      res.statusCode = 204;
      return res.end();
    }
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ ok: true, version: req.httpVersion }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  const s = await startStack({ proxy: true, extraFlags: ["--envd-proxy-guest-http2"] });
  stacks.push(s);
  try {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    s.cluster.nodes[0]!.attachGuest(sbx.sandboxId.replace("sb-", "sb_"), 49983, port);
    const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
    const r = await fetch(`${s.proxyUrl}/echo`, { headers: { host: `49983-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": token } });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ ok: true, version: "2.0" });
    expect(seen.at(-1)).toEqual({ version: "2.0", authority: `49983-${sbx.sandboxId}.${DOMAIN}`, token });
    await sbx.kill();
  } finally {
    server.close();
  }
});
