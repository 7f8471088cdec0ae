// sandbox-envd-proxy (the real process) relaying to a node published with an https:// address: sandboxd speaks
// plain HTTP and TLS lives at an edge in front of it (docs/envd-relay.md "TLS nodes"), so the node here is the
// simulator behind a TLS-terminating edge whose certificate a private CA signed. The process trusts that CA the way an
// operator makes it trust one, NODE_EXTRA_CA_CERTS. Proven: a request reaches the guest through the edge (owner read
// and ports relay both over TLS); an untrusted CA and a name the certificate does not hold are refused: the client
// gets 502 without a node detail, and the proxy's log names the node and the TLS reason.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { deriveAccessToken } from "#shared/e2b/tokens.ts";
import { openTunnel, TunnelUnreachable } from "#shared/relay/tunnel.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { createCA, issueCertificate } from "#shared/tls/index.ts";
import { waitFor } from "#tests/support/wait.ts";
import { startTestGuest, type TestGuest } from "../e2b/guest.ts";
import { spawnService, type Child } from "../e2b/process.ts";
import { startEdge, type Edge } from "../e2b/tls-edge.ts";
import { startKubeFixture, type KubeFixture } from "../vk-sandbox/kube-fixture.ts";
import { applyInventory, vouchingNode } from "#tests/kube/nodes.ts";

const ROOT = "root-proxy-tls";
const SECRET = "proxy-secret-tls";
const DOMAIN = "tls.test";

let kube: KubeFixture;
let sim: SandboxdSim;
let guest: TestGuest;
let edge: Edge;
let dir: string;

beforeAll(async () => {
  kube = await startKubeFixture({ crd: true });
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=4"] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  const ca = await createCA("envd-proxy-test-node-ca");
  const serving = await issueCertificate({ ca, cn: "localhost", dnsNames: ["localhost"], usages: "server" });
  edge = await startEdge(serving, () => Number(new URL(sim.url).port));
  dir = mkdtempSync(join(tmpdir(), "envd-proxy-tls-"));
  writeFileSync(join(dir, "secret"), SECRET);
  writeFileSync(join(dir, "token"), `${ROOT}\n`);
  writeFileSync(join(dir, "node-ca.pem"), ca.certPem);
  // A CA of the same name that did not sign the edge's certificate.
  writeFileSync(join(dir, "other-ca.pem"), (await createCA("envd-proxy-test-node-ca")).certPem);
}, 180_000);

afterAll(async () => {
  await edge?.stop();
  await guest?.stop();
  await sim?.stop();
  await kube?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function spawnProxy(caFile: string): Child {
  return spawnService(
    "sandbox-envd-proxy",
    ["--bind-address=127.0.0.1:0", "--namespace=team-a", `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(dir, "secret")}`, `--sandboxd-token-file=${join(dir, "token")}`],
    { KUBECONFIG: kube.cluster.kubeconfig(), NODE_EXTRA_CA_CERTS: caFile },
  );
}

/** Claim a sandbox on the simulator and publish it on a node whose sandboxd address is `address`. */
async function publishedSandbox(node: string, address: string): Promise<{ host: string; accessToken: string }> {
  const c = await new SandboxdClient({ baseUrl: sim.url, token: ROOT }).claim({ template: "img", claim_ref: `team-a/${node}` });
  await vouchingNode(kube.cluster, node, address);
  await applyInventory(kube.cluster, { node, address, entries: [{ id: c.id, name: `team-a/${node}`, phase: "Running" }] });
  return { host: `49983-${c.id.replace("sb_", "sb-")}.${DOMAIN}`, accessToken: deriveAccessToken(SECRET, c.token) };
}

describe("sandbox-envd-proxy to a TLS node (https:// address, private CA)", () => {
  test("trusting the node's CA: the request reaches the guest, the owner read and the ports relay both over TLS", async () => {
    const sb = await publishedSandbox("tls-good", `https://localhost:${edge.port}`);
    const p = spawnProxy(join(dir, "node-ca.pem"));
    try {
      const port = Number((await p.waitFor("envd proxy listening")).port);
      const relays = sim.requests.filter((r) => r.route === "ports").length;
      const before = edge.handshakes();
      const r = await waitFor("the proxy's inventory to hold tls-good", async () => {
        const res = await fetch(`http://127.0.0.1:${port}/echo?via=tls`, { method: "POST", headers: { host: sb.host, "x-access-token": sb.accessToken }, body: "over tls" });
        return res.status === 200 ? res : (await res.body?.cancel(), undefined);
      }, 20_000);
      const seen = (await r.json()) as { method: string; path: string; query: string; headers: Record<string, string>; body: string };
      expect([seen.method, seen.path, seen.query, seen.body, seen.headers.host]).toEqual(["POST", "/echo", "?via=tls", "over tls", sb.host]);
      expect(guest.requests.at(-1)?.path).toBe("/echo?via=tls");
      // The node is reachable only through the edge: one TLS handshake for the owner read, one for the relay.
      expect(edge.handshakes() - before).toBeGreaterThanOrEqual(2);
      expect(sim.requests.filter((x) => x.route === "ports").length).toBeGreaterThan(relays);
      expect(p.logLines("owner read failed")).toEqual([]);
      expect(p.logLines("ports relay to the node failed")).toEqual([]);
    } finally {
      await p.stop();
    }
  }, 60_000);

  test("a CA that did not sign the node's certificate: 502 to the client, the log names the node and the TLS reason", async () => {
    const sb = await publishedSandbox("tls-wrong-ca", `https://localhost:${edge.port}`);
    const p = spawnProxy(join(dir, "other-ca.pem"));
    try {
      const port = Number((await p.waitFor("envd proxy listening")).port);
      const failed = await waitFor("an owner read failure on tls-wrong-ca", async () => {
        const res = await fetch(`http://127.0.0.1:${port}/files?path=/x`, { headers: { host: sb.host, "x-access-token": sb.accessToken } });
        expect(res.status).toBe(502);
        const body = await res.json();
        expect(body).toEqual({ code: 502, message: "sandbox unavailable" }); // no node name, address or TLS detail
        return p.logLines("owner read failed").find((l) => l.node === "tls-wrong-ca");
      }, 20_000);
      expect(failed.address).toBe(`https://localhost:${edge.port}`);
      expect(String(failed.err)).toContain("unable to verify the first certificate");
      expect(guest.requests.some((g) => g.path === "/files?path=/x")).toBe(false);
    } finally {
      await p.stop();
    }
  }, 60_000);

  test("a name the node's certificate does not hold (the IP instead of localhost): refused the same way, naming the mismatch", async () => {
    const sb = await publishedSandbox("tls-wrong-name", `https://127.0.0.1:${edge.port}`);
    const p = spawnProxy(join(dir, "node-ca.pem"));
    try {
      const port = Number((await p.waitFor("envd proxy listening")).port);
      const failed = await waitFor("an owner read failure on tls-wrong-name", async () => {
        const res = await fetch(`http://127.0.0.1:${port}/files?path=/y`, { headers: { host: sb.host, "x-access-token": sb.accessToken } });
        expect(await res.json()).toEqual({ code: 502, message: "sandbox unavailable" });
        return p.logLines("owner read failed").find((l) => l.node === "tls-wrong-name");
      }, 20_000);
      expect(String(failed.err)).toContain("ERR_TLS_CERT_ALTNAME_INVALID");
      expect(guest.requests.some((g) => g.path === "/files?path=/y")).toBe(false);
    } finally {
      await p.stop();
    }
  }, 60_000);

  test("the ports relay dial on its own (openTunnel, as sandbox-e2b's in-process proxy uses it) refuses an untrusted node certificate", async () => {
    // This test process trusts no private CA: the TLS dial must fail verification, not fall back to cleartext or
    // skip the check, and say why.
    const c = await new SandboxdClient({ baseUrl: sim.url, token: ROOT }).claim({ template: "img", claim_ref: "team-a/direct" });
    const err = await openTunnel({ address: `https://localhost:${edge.port}`, claimId: c.id, port: 49983, token: c.token }).then(
      (sock) => {
        sock.destroy();
        return new Error("the tunnel opened through an untrusted certificate");
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TunnelUnreachable);
    expect((err as Error).message).toBe("ports relay dial failed: unable to verify the first certificate");
  });
});
