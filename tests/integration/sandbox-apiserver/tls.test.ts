// --tls-cipher-suites on a real process (docs/serving.md "Cipher suites"): openssl s_client is an independent TLS
// peer that offers exactly one suite; kube-apiserver (Go's crypto/tls) proxies kubectl through the aggregator to the
// same listener. Also: the flags accepted without effect warn once at startup.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { kubectl } from "../../kube/kubectl.ts";
import { type ApiserverProcess, type Stack, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

let stack: Stack;
let server: ApiserverProcess;

beforeAll(async () => {
  stack = await startStack();
  server = await stack.startServer({
    args: [
      "--enable-warm-pool-driver=false",
      "--sandboxd-token=t",
      // The serving certificate is ECDSA: one TLS 1.2 suite for it, plus a TLS 1.3 name (accepted, no effect).
      "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256",
      "--contention-profiling",
      "--enable-priority-and-fairness",
    ],
  });
  await stack.register(server.port);
}, 90_000);

afterAll(async () => {
  await server?.stop();
  await stack?.stop();
});

/** One handshake by the openssl CLI, offering `cipher` (TLS 1.2) or TLS 1.3 with its default suites. */
async function openssl(port: number, offer: { tls12Cipher: string } | { tls13Suite: string } | "tls1_3"): Promise<{ ok: boolean; out: string }> {
  const args =
    offer === "tls1_3" ? ["-tls1_3"] : "tls13Suite" in offer ? ["-tls1_3", "-ciphersuites", offer.tls13Suite] : ["-tls1_2", "-cipher", offer.tls12Cipher];
  const p = Bun.spawn(["openssl", "s_client", "-connect", `127.0.0.1:${port}`, "-brief", ...args], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  p.stdin.end();
  // Only a guard against a hung peer: s_client ends by itself at stdin's EOF. Generous, since a kill reads as a
  // failed handshake and a loaded machine can take seconds to spawn and run it.
  const timer = setTimeout(() => p.kill(), 20_000);
  const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
  const code = await p.exited;
  clearTimeout(timer);
  const text = out + err;
  return { ok: code === 0 && /CONNECTION ESTABLISHED/.test(text), out: text };
}

// openssl is the independent peer here; without it only the kubectl leg could run, which proves nothing about the list.
const hasOpenssl = Bun.which("openssl") !== null;

describe("--tls-cipher-suites", () => {
  test.skipIf(!hasOpenssl)("a TLS 1.2 client offering only a suite outside the list fails the handshake; the listed suite succeeds", async () => {
    const excluded = await openssl(server.port, { tls12Cipher: "ECDHE-ECDSA-AES128-GCM-SHA256" });
    expect(excluded.ok).toBe(false);
    expect(excluded.out).toMatch(/handshake failure|no shared cipher|alert/i);
    const listed = await openssl(server.port, { tls12Cipher: "ECDHE-ECDSA-AES256-GCM-SHA384" });
    expect(listed.ok).toBe(true);
    expect(listed.out).toContain("Ciphersuite: ECDHE-ECDSA-AES256-GCM-SHA384");
  });

  test.skipIf(!hasOpenssl)("TLS 1.3 is not governed by the list (as in Go): a client offering only a TLS 1.3 suite the list omits connects", async () => {
    const r = await openssl(server.port, { tls13Suite: "TLS_CHACHA20_POLY1305_SHA256" });
    expect(r.ok).toBe(true);
    expect(r.out).toContain("Protocol version: TLSv1.3");
    expect(r.out).toContain("Ciphersuite: TLS_CHACHA20_POLY1305_SHA256");
  });

  test("the aggregator (Go crypto/tls) still reaches the server: kubectl lists sandboxes through it", async () => {
    const r = await waitFor("the APIService to serve", async () => {
      const out = await kubectl(["get", "sandboxes", "-A", "-o", "name"], { kubeconfig: stack.admin });
      return out.code === 0 ? out : undefined;
    }, 20_000);
    expect(r.stderr).toBe("");
  });

  test.skipIf(!hasOpenssl)("only TLS 1.3 names leave TLS 1.2 without a suite: TLS 1.2 clients fail, TLS 1.3 ones connect", async () => {
    const only13 = await stack.startServer({ args: ["--enable-warm-pool-driver=false", "--sandboxd-token=t", "--tls-cipher-suites=TLS_AES_256_GCM_SHA384"] });
    try {
      expect((await openssl(only13.port, { tls12Cipher: "ECDHE-ECDSA-AES256-GCM-SHA384" })).ok).toBe(false);
      expect((await openssl(only13.port, "tls1_3")).ok).toBe(true);
    } finally {
      await only13.stop();
    }
  });
});

describe("flags accepted without effect", () => {
  test("--contention-profiling and --enable-priority-and-fairness each log one warning naming the flag at startup", () => {
    const warnings = server
      .stderr()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { level: number | string; flag?: string; msg: string })
      .filter((l) => l.flag !== undefined);
    expect(warnings.map((w) => w.flag).sort()).toEqual(["--contention-profiling", "--enable-priority-and-fairness"]);
    for (const w of warnings) {
      expect(w.msg).toContain("accepted for compatibility and has no effect");
      expect([40, "warn"]).toContain(w.level);
    }
  });
});
