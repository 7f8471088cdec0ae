// sandbox-e2b (the real process) with its in-process proxy, over a node that serves TLS: the simulator behind a TLS
// edge whose certificate a private CA signed, seeded and advertised as an https:// origin (docs/envd-relay.md
// "TLS nodes"). With the CA trusted through NODE_EXTRA_CA_CERTS, a sandbox is created (claim and envd /init over TLS)
// and a request reaches the guest through the in-process proxy's TLS tunnel. With a CA that did not sign the edge's
// certificate, startup stops (exit 1) naming the seed and the TLS reason.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { createCA, issueCertificate } from "#shared/tls/index.ts";
import { startTestGuest, type TestGuest } from "../e2b/guest.ts";
import { spawnE2b } from "../e2b/process.ts";
import { startEdge, type Edge } from "../e2b/tls-edge.ts";

const ROOT = "root-e2b-tls";
const KEY = "e2b_tlstlstlstlstls";
const DOMAIN = "e2b-tls.test";
let sim: SandboxdSim;
let guest: TestGuest;
let edge: Edge;
let dir: string;
let origin = "";

beforeAll(async () => {
  const ca = await createCA("e2b-test-node-ca");
  const serving = await issueCertificate({ ca, cn: "localhost", dnsNames: ["localhost"], usages: "server" });
  // The edge first: the node advertises the edge's origin, and the edge forwards to the node once it listens.
  edge = await startEdge(serving, () => Number(new URL(sim.url).port));
  origin = `https://localhost:${edge.port}`;
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=2"], advertiseAddr: origin });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  dir = mkdtempSync(join(tmpdir(), "e2b-tls-"));
  writeFileSync(join(dir, "secret"), "secret\n");
  writeFileSync(join(dir, "keys"), `${KEY}\n`);
  writeFileSync(join(dir, "node-ca.pem"), ca.certPem);
  writeFileSync(join(dir, "other-ca.pem"), (await createCA("e2b-test-node-ca")).certPem);
});

afterAll(async () => {
  await edge?.stop();
  await guest?.stop();
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const args = () => [
  `--sandboxd-seeds=${origin}`,
  `--sandboxd-token=${ROOT}`,
  "--inventory-poll=200ms",
  "--e2b-bind-address=127.0.0.1:0",
  "--envd-proxy-bind-address=127.0.0.1:0",
  `--e2b-domain=${DOMAIN}`,
  `--e2b-envd-secret-file=${join(dir, "secret")}`,
  `--e2b-api-key-file=${join(dir, "keys")}`,
];

test("trusting the node's CA: create (claim + envd /init) and the in-process proxy's relay all go over TLS to the guest", async () => {
  const child = spawnE2b(args(), { NODE_EXTRA_CA_CERTS: join(dir, "node-ca.pem") });
  try {
    const api = `http://127.0.0.1:${(await child.waitFor("e2b surface listening")).port}`;
    const proxy = `http://127.0.0.1:${(await child.waitFor("envd proxy listening")).port}`;
    const claimsBefore = sim.requests.filter((r) => r.route === "claim").length;
    const created = await fetch(`${api}/v2/sandboxes`, { method: "POST", headers: { "x-api-key": KEY }, body: '{"templateID":"img"}' });
    const sbx = (await created.json()) as { sandboxID: string; envdAccessToken: string };
    expect(created.status).toBe(201);
    expect(sim.requests.filter((r) => r.route === "claim").length).toBe(claimsBefore + 1);
    expect(guest.inits.at(-1)?.accessToken).toBe(sbx.envdAccessToken); // /init went through the TLS tunnel
    const handshakes = edge.handshakes();
    const r = await fetch(`${proxy}/echo?via=e2b-tls`, { method: "POST", headers: { host: `49983-${sbx.sandboxID}.${DOMAIN}`, "x-access-token": sbx.envdAccessToken }, body: "hello" });
    expect(r.status).toBe(200);
    const seen = (await r.json()) as { path: string; query: string; body: string };
    expect([seen.path, seen.query, seen.body]).toEqual(["/echo", "?via=e2b-tls", "hello"]);
    // The owner was primed at create: the relay needed only its own TLS connection to the node.
    expect(edge.handshakes()).toBeGreaterThan(handshakes);
    expect(child.output()).not.toContain("ports relay to the node failed");
  } finally {
    await child.stop();
  }
}, 60_000);

test("a CA that did not sign the node's certificate: exit 1 before serving, naming the seed and the TLS reason", async () => {
  const child = spawnE2b(args(), { NODE_EXTRA_CA_CERTS: join(dir, "other-ca.pem") });
  expect(await child.exited).toBe(1);
  const out = child.output();
  expect(out).toContain(`no sandboxd seed answered: ${origin}`);
  expect(out).toContain("unable to verify the first certificate");
  expect(out).not.toContain("e2b surface listening");
}, 60_000);
