// Issue 22 case 2, the readers' half, on the real kube-apiserver with the aggregator: NodeInventory objects that no
// known Node vouches for (one naming no Node, one naming a Node whose addresses are elsewhere) point at a listener
// that records every request. sandbox-apiserver (the warm-pool driver's PUT /v1/pools, live lookups, the aggregated
// API) and sandbox-envd-proxy (owner probes) must never call it, and `kubectl get sandboxes` must not show their
// entries, while the real node beside them is called and listed. Before the fix the listener got both calls with
// the fleet's root token, and the fake entries were listed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { envdAccessToken } from "#shared/e2b/tokens.ts";
import { waitFor } from "#tests/support/wait.ts";
import { kubectl } from "../../kube/kubectl.ts";
import { vouchingNode } from "../../kube/nodes.ts";
import { spawnService, type Child } from "../../integration/e2b/process.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "../../integration/sandbox-apiserver/fixture.ts";

const ROOT = "fleet-root-token";
const DOMAIN = "fake.test";
let stack: Stack;
let sim: SandboxdSim;
let server: ApiserverProcess;
let listener: ReturnType<typeof Bun.serve>;
const heard: { method: string; path: string; authorization: string | null }[] = [];
let realId = "";

const k = (args: string[]) => kubectl(args, { kubeconfig: stack.admin });

/** A NodeInventory as the vk-sandbox ServiceAccount could write any before the fix: entries and a pool, fresh. */
const fake = (name: string, address: string) => ({
  apiVersion: "sandbox.cocoonstack.io/v1beta1",
  kind: "NodeInventory",
  metadata: { name },
  node: name,
  address,
  publishedAt: rfc3339(Date.now()),
  pools: [{ template: "img", warm: 1, target: 1 }],
  entries: [{ name: `team/${name}-sb`, id: `sb_${name}`, phase: "Running" }],
});

beforeAll(async () => {
  stack = await startStack();
  await stack.cluster.createNamespace("team");
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img=2"] });
  listener = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      heard.push({ method: req.method, path: new URL(req.url).pathname, authorization: req.headers.get("authorization") });
      return Response.json({ sandboxes: [] });
    },
  });
  const claim = await new SandboxdClient({ baseUrl: sim.url, token: ROOT }).claim({ template: "img", claim_ref: "team/real-sb" });
  realId = claim.id;
  await stack.publish({ node: "real", address: sim.addr, publishedAt: rfc3339(Date.now()), entries: [{ name: "team/real-sb", id: realId, phase: "Running" }] });
  const fakeAddress = `127.0.0.1:${listener.port}`;
  await vouchingNode(stack.cluster, "victim", "10.77.0.1:7777"); // a real Node whose address is not the listener's
  await stack.cluster.apply([fake("ghost", fakeAddress), fake("victim", fakeAddress)]);
  server = await stack.startServer({ args: [`--sandboxd-token=${ROOT}`, "--warm-pool-sync-interval=1s"] });
  await stack.register(server.port);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await listener?.stop(true);
  await sim?.stop();
  await stack?.stop();
});

describe("issue 22 case 2: an inventory no known Node vouches for gets no call and is not listed", () => {
  test("kubectl get sandboxes lists the real node's sandbox and neither fake one; a get of a fake name is NotFound", async () => {
    const out = await waitFor("the real sandbox listed", async () => {
      const r = await k(["get", "sandboxes", "-A", "-o", "name"]);
      return r.stdout.includes("real-sb") ? r.stdout : undefined;
    }, 30_000);
    expect(out).not.toContain("ghost-sb");
    expect(out).not.toContain("victim-sb");
    const got = await k(["get", "sandbox", "ghost-sb", "-n", "team"]);
    expect(got.code).not.toBe(0);
    expect(got.stderr).toContain("NotFound");
  }, 60_000);

  test("the warm-pool driver PUTs the real node's pools and never the fake address", async () => {
    const puts = () => sim.requests.filter((r) => r.method === "PUT" && r.path === "/v1/pools").length;
    await waitFor("a driver pass reached the real node", () => puts() >= 2, 30_000);
    expect(heard).toEqual([]);
  }, 60_000);

  test("sandbox-envd-proxy probes and relays only through the real node: nothing reaches the fake address", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fake-inventory-"));
    writeFileSync(join(dir, "secret"), "envd-secret");
    writeFileSync(join(dir, "token"), `${ROOT}\n`);
    const proxy: Child = spawnService(
      "sandbox-envd-proxy",
      ["--bind-address=127.0.0.1:0", `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(dir, "secret")}`, `--sandboxd-token-file=${join(dir, "token")}`],
      { KUBECONFIG: stack.admin },
    );
    try {
      const port = Number((await proxy.waitFor("envd proxy listening")).port);
      const before = sim.requests.length;
      for (const id of ["sb_ghost", "sb_victim", "sb_unknown"]) {
        const r = await fetch(`http://127.0.0.1:${port}/`, { headers: { host: `49983-${id.replace("sb_", "sb-")}.${DOMAIN}`, "x-access-token": "0".repeat(64) } });
        expect(r.status).toBe(502);
        await r.body?.cancel();
      }
      // A well-formed unknown id with a token whose lane tag verifies is probed, on the real node only (with the root
      // token): the proxy did look, just not at the fake address.
      const unknown = "sb_0123456789abcdef";
      const r = await fetch(`http://127.0.0.1:${port}/`, { headers: { host: `49983-${unknown.replace("sb_", "sb-")}.${DOMAIN}`, "x-access-token": envdAccessToken("envd-secret", unknown, "no-such-claim-token") } });
      expect(r.status).toBe(502);
      await r.body?.cancel();
      expect(sim.requests.length).toBeGreaterThan(before);
      expect(heard).toEqual([]);
    } finally {
      await proxy.stop();
    }
  }, 60_000);
});
