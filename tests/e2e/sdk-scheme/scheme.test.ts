// The SDKs' own URL scheme (issue 20 part 6): with only E2B_DOMAIN and E2B_API_KEY set (and a test CA trusted by
// NODE_EXTRA_CA_CERTS / SSL_CERT_FILE), the stock JS SDK and the Python SDK (sync and async; HTTP/2 default and 1.1, the version it negotiated checked) reach
// https://api.<domain> and https://<port>-<id>.<domain> on both stacks through one wildcard name and certificate:
// sandbox-e2b's in-process proxy hands api.<domain> to its e2b app, sandbox-envd-proxy relays it to the apiserver's
// e2b address (--e2b-api-upstream). The SDK processes resolve names through their own dnsmasq (resolver.ts) inside
// a mount namespace; outside, the names resolve to nothing.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { createCA, issueCertificate } from "#shared/tls/index.ts";
import { DOMAIN as MESH_DOMAIN, KEY_A, startStack as startMesh, type Stack } from "#tests/integration/e2b/harness.ts";
import { REPO, startStack as startScriptStack, type RunningStack } from "#tests/e2e/stack/run-stack.ts";
import { E2B_DOMAIN as FULL_DOMAIN } from "#scripts/stack/mesh.ts";
import { kubectlBinary } from "#tests/kube/peers.ts";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";
import { run } from "#tests/support/run.ts";
import { waitFor } from "#tests/support/wait.ts";
import { resolverProblem, serviceLoopback, startResolver, type Resolver } from "./resolver.ts";

const problem = await resolverProblem((l) => console.log(l));
if (problem) console.log(`the SDK URL scheme test is skipped: ${problem}`);
// Skipped only where the machine cannot give the SDK its own resolver (not root, no unshare): the reason is logged.
const suite = problem ? describe.skip : describe;

let dir: string;
let caFile: string;
const certs = new Map<string, { certFile: string; keyFile: string }>();

beforeAll(async () => {
  if (problem) return;
  dir = mkdtempSync(join(tmpdir(), "sdk-scheme-"));
  const ca = await createCA("sdk-scheme-test-ca");
  caFile = join(dir, "ca.pem");
  writeFileSync(caFile, ca.certPem);
  for (const domain of [MESH_DOMAIN, FULL_DOMAIN]) {
    // One wildcard name for the API host and every sandbox host, as a deployment's certificate.
    const leaf = await issueCertificate({ ca, cn: `*.${domain}`, dnsNames: [`*.${domain}`], usages: "server" });
    const certFile = join(dir, `${domain}.crt`);
    const keyFile = join(dir, `${domain}.key`);
    writeFileSync(certFile, leaf.certPem);
    writeFileSync(keyFile, leaf.keyPem, { mode: 0o600 });
    certs.set(domain, { certFile, keyFile });
  }
  await ensurePythonSdk();
}, 300_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Only what the scheme needs: no E2B_API_URL, no E2B_SANDBOX_URL, no proxy settings. */
function clientEnv(domain: string, apiKey: string, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", E2B_DOMAIN: domain, E2B_API_KEY: apiKey, NODE_EXTRA_CA_CERTS: caFile, SSL_CERT_FILE: caFile, ...extra };
}

function lastJson(stdout: string): Record<string, unknown> {
  const line = stdout.trim().split("\n").filter((l) => l.startsWith("{")).at(-1);
  if (!line) throw new Error(`no JSON line in the client's output:\n${stdout}`);
  return JSON.parse(line) as Record<string, unknown>;
}

function scenarios(domain: string, apiKey: () => string, resolver: () => Resolver, answer: () => string) {
  test("inside, getent and Python's resolver give the service address for api.<domain> and <port>-<id>.<domain>; outside, nothing", async () => {
    const r = await resolver().inside(["getent", "hosts", `api.${domain}`, `49983-sb-x.${domain}`], clientEnv(domain, apiKey()));
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split("\n").map((l) => l.split(/\s+/)[0])).toEqual([answer(), answer()]);
    const outside = await run(["getent", "hosts", `api.${domain}`]);
    expect(outside.code).not.toBe(0);
  });

  test("the stock JS SDK with only E2B_DOMAIN and E2B_API_KEY: create, run, files, list, getInfo, a public port at getHost, kill over https", async () => {
    const r = await resolver().inside(["bun", join(import.meta.dir, "js-client.ts")], clientEnv(domain, apiKey()));
    if (r.code !== 0) throw new Error(`JS client exit ${r.code}:\n${r.stdout}\n${r.stderr}`);
    const out = lastJson(r.stdout);
    expect(out).toMatchObject({ run: "from-js\n", read: "written over https", info: "running", killed: true, publicPort: 200 });
    expect(out.host).toBe(`49983-${out.created}.${domain}`);
  }, 180_000);

  for (const mode of ["sync", "async"] as const) {
    for (const http of ["default", "1.1"] as const) {
      test(`the Python SDK (${mode}, HTTP ${http === "default" ? "default (2)" : "1.1"}) with only E2B_DOMAIN and E2B_API_KEY: create, run, files, list, getInfo, public and private ports at get_host over https; the HTTP version it negotiated`, async () => {
        const sdk = await ensurePythonSdk();
        const env = clientEnv(domain, apiKey(), { PYTHONUNBUFFERED: "1", ...(http === "1.1" ? { E2B_HTTP_VERSION: "1.1" } : {}) });
        const r = await resolver().inside([sdk.python, join(import.meta.dir, "py-client.py"), mode], env);
        if (r.code !== 0) throw new Error(`Python client exit ${r.code}:\n${r.stdout}\n${r.stderr}`);
        const out = lastJson(r.stdout);
        console.log(`${domain}, Python ${mode}, E2B_HTTP_VERSION ${http}: negotiated ${JSON.stringify(out.versions)}`);
        expect(out).toMatchObject({ mode, resolved: answer(), run: "from-python\n", read: "written over https", listed: true, info: "running", killed: true, public_port: 200, traffic_token: true, private_port: [401, 200] });
        expect(out.host).toBe(`49983-${out.created}.${domain}`);
        // Over TLS the SDK's transport leaves the version to ALPN: h2 on the API host and the sandbox hosts by default
        // (file downloads excepted: the SDK pins them to HTTP/1.1 itself), HTTP/1.1 everywhere when
        // E2B_HTTP_VERSION=1.1 pins it.
        const want = http === "default" ? ["HTTP/2"] : ["HTTP/1.1"];
        expect(out.versions).toEqual({ api: want, sandbox: want, download: ["HTTP/1.1"] });
      }, 180_000);
    }
  }
}

suite("sandbox-e2b mesh: the in-process proxy on <addr>:443 serves api.<domain> itself", () => {
  let s: Stack;
  let resolver: Resolver;
  const addr = serviceLoopback();
  beforeAll(async () => {
    const cert = certs.get(MESH_DOMAIN)!;
    s = await startMesh({ guestAgents: true, extraFlags: [`--envd-proxy-bind-address=${addr}:443`, `--envd-proxy-tls-cert-file=${cert.certFile}`, `--envd-proxy-tls-private-key-file=${cert.keyFile}`] });
    resolver = await startResolver(MESH_DOMAIN, addr);
  }, 120_000);
  afterAll(async () => {
    await resolver?.stop();
    await s?.stop();
  });
  scenarios(MESH_DOMAIN, () => KEY_A, () => resolver, () => addr);
});

suite("full stack: a sandbox-envd-proxy on 127.0.0.1:443 relays api.<domain> to the apiserver's e2b address (--e2b-api-upstream)", () => {
  let stack: RunningStack;
  let proxy: Subprocess<"ignore", "pipe", "pipe"> | undefined;
  let resolver: Resolver;
  // The script stack's domain is e2b.localhost, and names under .localhost are loopback to the SDKs' own resolvers
  // (RFC 6761: the Python SDK's Rust transport and Bun answer 127.0.0.1 without asking dnsmasq), so this proxy
  // must be on 127.0.0.1:443 itself; dnsmasq answers the same address for every other resolver (getent).
  const addr = "127.0.0.1";
  beforeAll(async () => {
    await kubectlBinary();
    stack = await startScriptStack([], 600_000);
    const cert = certs.get(FULL_DOMAIN)!;
    // The chart's proxy as a deployment runs it: TLS with the wildcard certificate, the API relayed upstream.
    proxy = Bun.spawn(["bun", join(REPO, "services/sandbox-envd-proxy/main.ts"), `--bind-address=${addr}:443`, `--domain=${FULL_DOMAIN}`,
      `--tls-cert-file=${cert.certFile}`, `--tls-private-key-file=${cert.keyFile}`, `--e2b-envd-secret-file=${join(stack.workDir!, "envd-secret")}`,
      `--sandboxd-token-file=${join(stack.workDir!, "sandboxd-token")}`, `--e2b-api-upstream=${stack.env.E2B_API_URL}`],
      { cwd: REPO, env: { ...process.env, KUBECONFIG: stack.env.KUBECONFIG!, OPERATOR_LOG_LEVEL: "warn" }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    await waitFor("the TLS proxy", async () => {
      const r = await fetch(`https://${addr}/healthz`, { tls: { rejectUnauthorized: false } } as RequestInit).catch(() => undefined);
      return r?.status === 204 ? true : undefined;
    }, 60_000);
    resolver = await startResolver(FULL_DOMAIN, addr);
  }, 720_000);
  afterAll(async () => {
    await resolver?.stop();
    proxy?.kill("SIGTERM");
    await proxy?.exited;
    await stack?.discard("sdk-scheme");
  });
  scenarios(FULL_DOMAIN, () => stack.env.E2B_API_KEY!, () => resolver, () => addr);
});
