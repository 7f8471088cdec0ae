// Process-level behaviour of sandbox-apiserver on the real kube-apiserver: startup failures in the spec's order,
// log level, the sandboxd token, and a graceful shutdown with an open watch. Scenario numbers lead the names.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { StartupError } from "#shared/config/index.ts";
import { Shutdown } from "#shared/lifecycle/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { parseApiserverFlags } from "#services/sandbox-apiserver/flags.ts";
import { startApiserver } from "#services/sandbox-apiserver/wire.ts";
import { NAMESPACE, type Stack, authReaderBinding, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

const REPO = join(import.meta.dir, "../../..");
const IMG = "ghcr.io/x:1";
let stack: Stack;
let sim: SandboxdSim;

beforeAll(async () => {
  // Neither the CRDs nor the auth-reader binding at first: the first two scenarios need their absence.
  stack = await startStack({ crds: false, authReader: false });
  sim = await startSandboxdSim({ rootToken: "tok", pools: [`${IMG}/none/small=5`] });
}, 60_000);

afterAll(async () => {
  await sim?.stop();
  await stack?.stop();
});

const sandboxBody = (name: string) =>
  JSON.stringify({ apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name }, spec: { podTemplate: { spec: { containers: [{ name: "c", image: IMG }] } } } });

/** The `msg` of every JSON log line the process wrote to stderr. */
function messages(p: { stderr(): string }): string {
  return p
    .stderr()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => (JSON.parse(l) as { msg?: string }).msg ?? "")
    .join("\n");
}

async function exited(p: { proc: { exited: Promise<number> } }, ms = 30_000): Promise<number> {
  return Promise.race([p.proc.exited, Bun.sleep(ms).then(() => -1)]);
}

describe("startup order and failures", () => {
  test("34: without the NodeInventory CRD startup fails after the sync wait with the CRD hint (wait shortened through startApiserver)", async () => {
    // In-process: the 2 min wait is shortened through the programmatic entry, not a flag or an environment variable
    // (the seed's flag table is the binary's whole --help). runMain turns a StartupError into one JSON line and exit 1.
    const env = { KUBECONFIG: stack.serverKubeconfig, POD_NAMESPACE: NAMESPACE };
    const outcome = parseApiserverFlags(["--secure-port=0", "--bind-address=127.0.0.1", `--tls-cert-file=${stack.certFile}`, `--tls-private-key-file=${stack.keyFile}`], env);
    if (outcome.kind !== "run") throw new Error("flags did not parse to a run");
    const log = createLogger({ level: "error", name: "sandbox-apiserver", destination: { write: () => undefined } });
    const shutdown = new Shutdown({ logger: log, exit: () => {}, signals: { on() {}, off() {} } });
    const started = Date.now();
    const err = await startApiserver({ config: outcome.config, log, env, shutdown, inventorySyncTimeoutMs: 2000 }).then(
      () => new Error("startApiserver resolved without the NodeInventory CRD"),
      (e: unknown) => e,
    );
    await shutdown.shutdown("test over");
    expect(err).toBeInstanceOf(StartupError);
    expect((err as Error).message).toBe("kubeinventory: node inventory cache did not sync within 2s (is the NodeInventory.sandbox.cocoonstack.io CRD installed?)");
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
  });

  test("33: without the auth-reader RoleBinding startup fails naming extension-apiserver-authentication", async () => {
    await stack.cluster.apply(readFileSync(join(REPO, "manifests/crds/nodeinventories.sandbox.cocoonstack.io.yaml"), "utf8"));
    await stack.cluster.apply(readFileSync(join(REPO, "manifests/crds/nodeinventoryshards.sandbox.cocoonstack.io.yaml"), "utf8"));
    const p = await stack.startServer({ waitReady: false });
    expect(await exited(p)).toBe(1);
    expect(p.stderr()).toContain("extension-apiserver-authentication");
    expect(p.stderr()).toMatch(/forbidden/i);
  });

  test("35: OPERATOR_LOG_LEVEL=verbose exits 1; debug writes debug JSON lines to stderr", async () => {
    await stack.cluster.apply(await authReaderBinding());
    const bad = await stack.startServer({ waitReady: false, env: { OPERATOR_LOG_LEVEL: "verbose" } });
    expect(await exited(bad)).toBe(1);
    expect(bad.stderr()).toContain("OPERATOR_LOG_LEVEL");
    const dbg = await stack.startServer({ env: { OPERATOR_LOG_LEVEL: "debug" }, args: ["--enable-warm-pool-driver=false"] });
    await waitFor("a debug line", () => dbg.stderr().split("\n").some((l) => l.startsWith("{") && JSON.parse(l).level === "debug"), 5000);
    expect(await dbg.stop()).toBe(0);
  });
});

describe("serving certificate", () => {
  test("without --tls-cert-file the server self-signs apiserver.crt/.key in --cert-dir for localhost and loopback, and reuses them", async () => {
    const certDir = join(stack.dir, "certs");
    const first = await stack.startServer({ servingCert: false, args: [`--cert-dir=${certDir}`, "--enable-warm-pool-driver=false"] });
    const pem = readFileSync(join(certDir, "apiserver.crt"), "utf8");
    const cert = new X509Certificate(pem);
    expect(cert.subjectAltName).toContain("DNS:localhost");
    expect(cert.subjectAltName).toContain("IP Address:127.0.0.1");
    // The served certificate is that one: verification against it as the CA passes for "localhost".
    const r = await fetch(`https://localhost:${first.port}/livez`, { tls: { ca: pem } });
    expect(await r.text()).toBe("ok");
    expect(await first.stop()).toBe(0);
    const second = await stack.startServer({ servingCert: false, args: [`--cert-dir=${certDir}`, "--enable-warm-pool-driver=false"] });
    expect(readFileSync(join(certDir, "apiserver.crt"), "utf8")).toBe(pem);
    expect(await second.stop()).toBe(0);
  });
});

describe("sandboxd token (spec §3)", () => {

  test("36: --sandboxd-token-file holding '  tok\\n' presents Bearer tok and ignores --sandboxd-token; a missing file exits 1", async () => {
    const file = join(stack.dir, "token");
    writeFileSync(file, "  tok\n");
    await stack.publish({ node: "n1", address: sim.addr, publishedAt: rfc3339(Date.now()), pools: [{ template: IMG, warm: 5, target: 5 }] });
    const s = await stack.startServer({ args: [`--sandboxd-token-file=${file}`, "--sandboxd-token=ignored", "--enable-warm-pool-driver=false"] });
    await stack.register(s.port);
    const r = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes", { method: "POST", body: sandboxBody("tok36"), headers: { "content-type": "application/json" } });
    expect(r.status).toBe(201);
    // The simulator accepted the call as its root token ("tok"): the file's content, trimmed.
    expect(sim.requests.filter((x) => x.route === "claim").at(-1)!.auth).toBe("root");
    await s.stop();
    const missing = await stack.startServer({ waitReady: false, args: [`--sandboxd-token-file=${join(stack.dir, "nope")}`] });
    expect(await exited(missing)).toBe(1);
    expect(messages(missing)).toContain(`sandboxd: read token file "${join(stack.dir, "nope")}"`);
  });

  test("37: no token sends no Authorization header; a token-requiring node answers 401 so create is a 500", async () => {
    const s = await stack.startServer({ args: ["--enable-warm-pool-driver=false"] });
    await stack.register(s.port);
    const r = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes", { method: "POST", body: sandboxBody("tok37"), headers: { "content-type": "application/json" } });
    expect(r.status).toBe(500);
    expect(((await r.json()) as { message: string }).message).toContain("claim sandbox default/tok37");
    expect(sim.requests.filter((x) => x.route === "claim").at(-1)!.auth).toBe("none");
    await s.stop();
  });
});

describe("shutdown", () => {
  test("44: SIGTERM with an open watch: /readyz fails, the watch ends within 2 s, exit 0", async () => {
    const s = await stack.startServer({ args: ["--enable-warm-pool-driver=false"] });
    await stack.register(s.port);
    const ac = new AbortController();
    const res = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/sandboxes?watch=true", { signal: ac.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    // The watch ends either cleanly or as a reset from the aggregator's proxy: both are "ended".
    const ended = (async () => {
      try {
        for (;;) {
          const { done } = await reader.read();
          if (done) return Date.now();
        }
      } catch {
        return Date.now();
      }
    })();
    const signalled = Date.now();
    s.proc.kill("SIGTERM");
    // Readiness flips before the listener closes.
    const ready = await fetch(`https://127.0.0.1:${s.port}/readyz`, { tls: { ca: stack.caPem } }).then((r) => r.status).catch(() => "closed");
    expect([500, "closed"]).toContain(ready);
    const endAt = await Promise.race([ended, Bun.sleep(5000).then(() => Infinity)]);
    expect(endAt - signalled).toBeLessThan(2000);
    expect(await exited(s)).toBe(0);
    ac.abort();
  }, 30_000);
});
