// Issue 20 part 3 on the kube stack: sandbox-apiserver's e2b surface takes --public-traffic-default and
// --forbid-public-traffic (as sandbox-e2b does), so the stamp it writes on a create follows the operator's policy and
// sandbox-envd-proxy (a real process reading the NodeInventory) enforces it. Before, the apiserver stamped every
// create public, so the proxy's own --public-traffic-default=false had no effect on new sandboxes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { trafficAccessToken } from "#shared/envd-token/index.ts";
import { freePorts } from "../../kube/ports.ts";
import { e2bServerArgs, publishSimNode, writeE2bFiles } from "#tests/support/e2b-apiserver.ts";
import { waitFor } from "#tests/support/wait.ts";
import { startTestGuest, type TestGuest } from "./guest.ts";
import { spawnService, type Child } from "./process.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "../sandbox-apiserver/fixture.ts";

const ROOT = "root-e2b-public-traffic";
const KEY = "e2b_4444444444444444444444444444444444444444";
const DOMAIN = "sb.test";
const USER_PORT = 3000;
let stack: Stack;
let sim: SandboxdSim;
let guest: TestGuest;
const servers: ApiserverProcess[] = [];
const proxies: Child[] = [];

const trafficOf = (sbx: Sandbox) => (sbx as unknown as { trafficAccessToken?: string }).trafficAccessToken;

/** The inventory as vk-sandbox publishes it: every claim of the sim with its metadata (the public-ports stamp). */
const publishClaims = () =>
  publishSimNode(
    stack,
    sim,
    sim.claims().map((c) => ({ id: c.id, name: c.claimRef, claimRef: c.claimRef, phase: "Running", template: "img:1", claimedAt: rfc3339(Date.now()), claimMetadata: JSON.stringify(c.metadata ?? {}) })),
  );

async function startE2b(flags: string[]): Promise<string> {
  const [port] = freePorts(1);
  servers.push(await stack.startServer({ args: e2bServerArgs({ rootToken: ROOT, port, dir: stack.dir, domain: DOMAIN }, ...flags) }));
  return `http://127.0.0.1:${port}`;
}

/**
 * sandbox-envd-proxy on the same cluster's NodeInventory, with the same public-ports flags and every namespace's
 * inventory (the chart's envdProxy.namespace ""), as the chart sets them.
 */
async function startProxy(flags: string[]): Promise<string> {
  const p = spawnService(
    "sandbox-envd-proxy",
    ["--bind-address=127.0.0.1:0", `--domain=${DOMAIN}`, "--namespace=", `--e2b-envd-secret-file=${join(stack.dir, "secret")}`, `--sandboxd-token-file=${join(stack.dir, "token")}`, ...flags],
    { KUBECONFIG: stack.admin },
  );
  proxies.push(p);
  return `http://127.0.0.1:${Number((await p.waitFor("envd proxy listening")).port)}`;
}

beforeAll(async () => {
  stack = await startStack();
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img:1/none/small=4"] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  sim.attachGuest("*", USER_PORT, guest.port);
  writeE2bFiles(stack.dir, `${KEY} team-pt\n`);
  writeFileSync(join(stack.dir, "token"), `${ROOT}\n`);
  await publishClaims();
}, 60_000);

afterAll(async () => {
  for (const p of proxies) await p.stop();
  for (const s of servers) await s.stop();
  await sim?.stop();
  await guest?.stop();
  await stack?.stop();
});

describe("sandbox-apiserver's public-ports flags", () => {
  test("--public-traffic-default=false: a create without network gets a trafficAccessToken, and the proxy wants it on a user port", async () => {
    const flags = ["--public-traffic-default=false"];
    const api = await startE2b(flags);
    const opts = { apiKey: KEY, apiUrl: api, domain: DOMAIN, requestTimeoutMs: 10_000 };
    const sbx = await Sandbox.create("base", opts);
    const traffic = trafficOf(sbx);
    expect(traffic).toMatch(/^[0-9a-f]{64}$/);
    const claim = sim.claims().find((c) => c.id === sbx.sandboxId.replace(/^sb-/, "sb_"))!;
    expect(claim.metadata?.["vk-sandbox.public-traffic"]).toBe("false");
    await publishClaims();
    const proxy = await startProxy(flags);
    const call = (headers: Record<string, string> = {}) => fetch(`${proxy}/app`, { headers: { host: `${USER_PORT}-${sbx.sandboxId}.${DOMAIN}`, ...headers } });
    const before = guest.requests.length;
    // The proxy's Node and NodeInventory caches fill after it listens: wait until it knows the sandbox.
    const none = await waitFor("the proxy to find the sandbox in the inventory", async () => {
      const r = await call();
      if (r.status !== 502) return r;
      await r.body?.cancel();
      return undefined;
    });
    expect(none.status).toBe(401);
    expect(((await none.json()) as { message: string }).message).toContain("e2b-traffic-access-token");
    expect(guest.requests.length).toBe(before); // nothing reached the sandbox
    const right = await call({ "e2b-traffic-access-token": traffic! });
    expect(right.status).toBe(200);
    expect(guest.requests.slice(before).map((r) => r.path)).toEqual(["/app"]);
    // A create that asks for public ports still gets them: the flag is a default, not a ban.
    const open = await Sandbox.create("base", { ...opts, network: { allowPublicTraffic: true } });
    expect(trafficOf(open)).toBeUndefined();
    expect(await Sandbox.kill(sbx.sandboxId, opts)).toBe(true);
    expect(await Sandbox.kill(open.sandboxId, opts)).toBe(true);
  }, 90_000);

  test("--forbid-public-traffic: allowPublicTraffic: true is a 400 naming the flag; a plain create is not public", async () => {
    const api = await startE2b(["--forbid-public-traffic"]);
    const post = (body: Record<string, unknown>) =>
      fetch(`${api}/sandboxes`, { method: "POST", headers: { "x-api-key": KEY, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base", ...body }) });
    const claimsBefore = sim.claims().length;
    const refused = await post({ network: { allowPublicTraffic: true } });
    expect(refused.status).toBe(400);
    const problem = (await refused.json()) as { code: number; message: string };
    expect(problem.code).toBe(400);
    expect(problem.message).toContain("--forbid-public-traffic");
    expect(sim.claims().length).toBe(claimsBefore); // nothing was claimed
    const plain = await post({});
    expect(plain.status).toBe(201);
    const made = (await plain.json()) as { sandboxID: string; trafficAccessToken?: string };
    expect(made.trafficAccessToken).toMatch(/^[0-9a-f]{64}$/);
    const opts = { apiKey: KEY, apiUrl: api, domain: DOMAIN };
    expect(await Sandbox.kill(made.sandboxID, opts)).toBe(true);
  }, 60_000);
});

// Issue 27 (medium): an unstamped claim took the proxy's --public-traffic-default (true in the chart), so every
// Sandbox created through the Kubernetes API was public on every user port, where before public ports it needed a
// token. Now only a claim stamped public is (docs/decisions.md "Unstamped claims are private"); the flag keeps its
// meaning for e2b creates, which are always stamped.
describe("a Sandbox created through the Kubernetes API (no public-ports stamp)", () => {
  test("is private on sandbox-envd-proxy under the default flags: no token is 401, its traffic token is relayed; an e2b create that does not say stays public", async () => {
    const [e2bPort] = freePorts(1);
    const server = await stack.startServer({ args: e2bServerArgs({ rootToken: ROOT, port: e2bPort, dir: stack.dir, domain: DOMAIN }) });
    servers.push(server);
    await stack.register(server.port);
    const body = { apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name: "kube-made" }, spec: { podTemplate: { spec: { containers: [{ name: "c", image: "img:1" }] } } } };
    await waitFor("warm VMs", () => sim.info().pools.every((p) => p.warm > 0));
    await publishClaims();
    // The server's fleet view follows the NodeInventory a watch event later: until then the pool reads dry (503).
    const created = await waitFor("the aggregated Create to find the warm pool", async () => {
      const r = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/team-pt/sandboxes", { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
      if (r.status !== 503) return r;
      await r.body?.cancel();
      return undefined;
    });
    expect(created.status).toBe(201);
    const ann = ((await created.json()) as { metadata: { annotations: Record<string, string> } }).metadata.annotations;
    const claimId = ann["sandbox.cocoonstack.io/claim-id"]!;
    const claim = sim.claims().find((c) => c.id === claimId)!;
    expect(claim.claimRef).toBe("team-pt/kube-made");
    expect(claim.metadata?.["vk-sandbox.public-traffic"]).toBeUndefined(); // the Kubernetes path stamps nothing
    // An e2b create under the same default flags: stamped public.
    const opts = { apiKey: KEY, apiUrl: `http://127.0.0.1:${e2bPort}`, domain: DOMAIN, requestTimeoutMs: 10_000 };
    const open = await Sandbox.create("base", opts);
    expect(trafficOf(open)).toBeUndefined();
    await publishClaims();
    const proxy = await startProxy([]);
    const call = (id: string, headers: Record<string, string> = {}) => fetch(`${proxy}/app`, { headers: { host: `${USER_PORT}-${id}.${DOMAIN}`, ...headers } });
    const kubeId = claimId.replace(/^sb_/, "sb-");
    const before = guest.requests.length;
    const none = await waitFor("the proxy to find the Kubernetes sandbox in the inventory", async () => {
      const r = await call(kubeId);
      if (r.status !== 502) return r;
      await r.body?.cancel();
      return undefined;
    });
    expect(none.status).toBe(401);
    expect(((await none.json()) as { message: string }).message).toContain("e2b-traffic-access-token");
    expect(guest.requests.length).toBe(before); // nothing reached the sandbox
    // The claim's traffic token (derived from its claim token, as for an e2b create) opens the port.
    const right = await call(kubeId, { "e2b-traffic-access-token": trafficAccessToken("envd-secret", ann["sandbox.cocoonstack.io/token"]!) });
    expect(right.status).toBe(200);
    expect(guest.requests.slice(before).map((r) => r.path)).toEqual(["/app"]);
    // --public-traffic-default keeps its meaning for e2b creates: the SDK's sandbox answers with no token.
    const pub = await waitFor("the proxy to find the e2b sandbox", async () => {
      const r = await call(open.sandboxId);
      if (r.status !== 502) return r;
      await r.body?.cancel();
      return undefined;
    });
    expect(pub.status).toBe(200);
    expect(await Sandbox.kill(open.sandboxId, opts)).toBe(true);
    const del = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/team-pt/sandboxes/kube-made", { method: "DELETE" });
    expect(del.status).toBe(200);
  }, 90_000);
});
