// A Pod's microVM does not exist for the e2b surface (docs/e2b.md "Pod-backed sandboxes"). vk-sandbox claims a Pod's
// VM under claim_ref `<ns>/<pod>` and stamps `vk-sandbox.pod-uid`; an e2b key whose namespace is that Kubernetes
// namespace must not list, read, connect to (and so get the envd token of), pause, fork, snapshot or kill it, through
// the REST API, the SDK, or the envd proxy (its fleet-view path and its live-probe path). Real sandbox-e2b in-process
// on one simulated sandboxd node; the claims are made the way vk-sandbox makes them, with the root token.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox, SandboxNotFoundError } from "e2b";
import { DOMAIN, ROOT, SECRET, sdkOpts, startStack, type Stack } from "./harness.ts";
import { sameSandboxId } from "#shared/e2b/ids.ts";
import { envdAccessToken } from "#shared/e2b/tokens.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { NODE_METADATA_KEY, POD_UID_METADATA_KEY } from "#shared/sandboxd/metadata.ts";
import { standaloneProxy, unlisted } from "#tests/support/standalone-proxy.ts";
import { until } from "#tests/support/wait.ts";
import type { FleetNode } from "#shared/fleet/index.ts";

const KEY_D = "e2b_dddddddddddddddddddddddddddddddddddddddd";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ keys: `${KEY_D} default\n`, pools: ["img:1/none/small=8"], proxy: true });
}, 60_000);
afterAll(async () => {
  await s?.stop();
});

const node = () => s.cluster.nodes[0]!;
const root = () => new SandboxdClient({ baseUrl: node().url, token: ROOT });
const MUTATING = new Set(["release", "renew", "hibernate", "wake", "fork", "checkpoint", "ports", "checkpoint-claim"]);
const mutatingCalls = () => node().requests.filter((e) => e.route !== null && MUTATING.has(e.route)).length;

/** A claim made as vk-sandbox makes it for Pod `default/<pod>`; `stamped: false` is the same claim without the stamp. */
async function claimForPod(pod: string, stamped = true) {
  const c = await root().claim({
    template: "img:1",
    claim_ref: `default/${pod}`,
    ...(stamped ? { metadata: { [POD_UID_METADATA_KEY]: `uid-${pod}`, [NODE_METADATA_KEY]: "node-1" } } : {}),
  });
  return { claimId: c.id, pub: c.id.replace("sb_", "sb-"), token: c.token };
}

async function api(method: string, path: string, body?: unknown) {
  const r = await fetch(`${s.apiUrl}${path}`, { method, headers: { "content-type": "application/json", "x-api-key": KEY_D }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await r.text();
  return { status: r.status, text };
}

function routes(id: string): Array<[string, string, unknown?]> {
  return [
    ["GET", `/sandboxes/${id}`],
    ["POST", `/sandboxes/${id}/timeout`, { timeout: 30 }],
    ["POST", `/sandboxes/${id}/refreshes`, { duration: 30 }],
    ["POST", `/sandboxes/${id}/pause`],
    ["POST", `/sandboxes/${id}/resume`, {}],
    ["POST", `/sandboxes/${id}/connect`, { timeout: 30 }],
    ["POST", `/v2/sandboxes/${id}/connect`, { timeout: 30 }],
    ["GET", `/sandboxes/${id}/metrics`],
    ["GET", `/sandboxes/${id}/logs`],
    ["GET", `/v2/sandboxes/${id}/logs`],
    ["POST", `/sandboxes/${id}/fork`, {}],
    ["POST", `/sandboxes/${id}/snapshots`, {}],
    ["DELETE", `/sandboxes/${id}`],
  ];
}

/** Every REST route is 404 (no token in any body), the lists do not name it, and no node call touched it. */
async function expectAbsent(pub: string): Promise<void> {
  const before = mutatingCalls();
  for (const [m, p, body] of routes(pub)) {
    const r = await api(m, p, body);
    expect([m, p, r.status]).toEqual([m, p, 404]);
    expect(r.text).not.toContain("envdAccessToken");
  }
  for (const list of ["/sandboxes", "/v2/sandboxes", `/sandboxes/metrics?sandbox_ids=${pub}`]) {
    const r = await api("GET", list);
    expect(r.status).toBe(200);
    expect(r.text).not.toContain(pub);
  }
  expect(mutatingCalls()).toBe(before);
}

/** The SDK sees no such sandbox either. */
async function expectAbsentForSdk(pub: string): Promise<void> {
  const o = sdkOpts(s, KEY_D);
  expect(await Sandbox.getInfo(pub, o).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
  expect(await Sandbox.connect(pub, o).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
  expect(await Sandbox.pause(pub, o).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
  expect(await Sandbox.setTimeout(pub, 1000, o).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
  expect(await Sandbox.createSnapshot(pub, o).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
  expect(await Sandbox.kill(pub, o)).toBe(false);
  expect((await Sandbox.list(o).nextItems()).map((x) => x.sandboxId)).not.toContain(pub);
}

const listedByFleet = (claimId: string) =>
  until(() => s.mesh.fleet.nodes().some((n) => n.entries.some((e) => sameSandboxId(claimId, e.id))), `the fleet view to list ${claimId}`, 15_000, 20);

/** A standalone proxy (the chart's sandbox-envd-proxy) over `view` of the surface's fleet view. */
const proxyOver = (view: (nodes: readonly FleetNode[]) => FleetNode[]) =>
  standaloneProxy({ domain: DOMAIN, envdSecret: SECRET, rootToken: ROOT, nodes: () => view(s.mesh.fleet.nodes()) });

/** A standalone proxy whose view lists nothing: every lookup is a live probe. */
const probingProxy = () => proxyOver(unlisted);

/** `/health` through a proxy with the access token the surface would have issued for the claim. */
async function throughProxy(proxyUrl: string, c: { claimId: string; pub: string; token: string }): Promise<number> {
  const r = await fetch(`${proxyUrl}/health`, { headers: { host: `49983-${c.pub}.${DOMAIN}`, "x-access-token": envdAccessToken(SECRET, c.claimId, c.token) } });
  await r.arrayBuffer();
  return r.status;
}

describe("a Pod-backed sandbox in the key's namespace", () => {
  test("control: the same claim without vk-sandbox's stamp is the key's (so the 404s below are the stamp's doing)", async () => {
    const plain = await claimForPod("plain-0", false);
    expect((await api("GET", `/sandboxes/${plain.pub}`)).status).toBe(200);
    expect(await throughProxy(s.proxyUrl!, plain)).toBe(204);
    const { server, url } = probingProxy();
    try {
      expect(await throughProxy(url, plain)).toBe(204);
    } finally {
      server.stop(true);
    }
    await listedByFleet(plain.claimId);
    expect((await api("GET", "/v2/sandboxes")).text).toContain(plain.pub);
  }, 60_000);

  test("found by the live probe (not yet listed): 404 on every route, unlisted, refused by both proxies", async () => {
    const pod = await claimForPod("web-0");
    // Right after the claim the surface's view does not list it yet: the probe path answers.
    expect(s.mesh.fleet.nodes().some((n) => n.entries.some((e) => e.id === pod.claimId))).toBe(false);
    await expectAbsent(pod.pub);
    const { server, url } = probingProxy();
    try {
      expect(await throughProxy(url, pod)).toBe(502);
    } finally {
      server.stop(true);
    }
    expect((await root().get(pod.claimId)).claim_ref).toBe("default/web-0");
  }, 60_000);

  test("listed by the fleet view: 404 on every route and for the SDK, refused by the proxy, the VM untouched", async () => {
    const pod = await claimForPod("web-1");
    await listedByFleet(pod.claimId);
    await expectAbsent(pod.pub);
    await expectAbsentForSdk(pod.pub);
    expect(await throughProxy(s.proxyUrl!, pod)).toBe(502);
    const row = await root().get(pod.claimId);
    expect(row.hibernated).toBe(false);
    expect(row.metadata?.[POD_UID_METADATA_KEY]).toBe("uid-web-1");
  }, 60_000);

  test("a key cannot forge the stamp: create with a vk-sandbox.* metadata key is a 400", async () => {
    const r = await api("POST", "/sandboxes", { templateID: "img:1", metadata: { [POD_UID_METADATA_KEY]: "x" } });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text)).toEqual({ code: 400, message: expect.stringContaining("reserved") });
  });
});

describe("the node's row has the last word (issue 31)", () => {
  test("a fleet entry without the Pod stamp whose node row carries it: the proxy refuses the right token, relays nothing and keeps refusing", async () => {
    const pod = await claimForPod("web-2");
    const plain = await claimForPod("plain-2", false);
    await listedByFleet(pod.claimId);
    await listedByFleet(plain.claimId);
    // An inventory that lost the stamp (an older vk-sandbox, a publish racing the stamp): the entry reads as the key's.
    const entry = () => s.mesh.fleet.nodes().flatMap((n) => n.entries).find((e) => e.id === pod.claimId);
    expect(entry()?.metadata?.[POD_UID_METADATA_KEY]).toBe("uid-web-2");
    const unstamped = (nodes: readonly FleetNode[]) =>
      nodes.map((n) => ({ ...n, entries: n.entries.map((e) => ({ ...e, metadata: Object.fromEntries(Object.entries(e.metadata ?? {}).filter(([k]) => k !== POD_UID_METADATA_KEY)) })) }));
    const { server, url } = proxyOver(unstamped);
    try {
      // Control: the same path relays an unstamped claim (so the refusal below is the row's stamp at work).
      expect(await throughProxy(url, plain)).toBe(204);
      const guestBefore = s.guest.requests.length;
      const portsBefore = node().requests.filter((e) => e.route === "ports").length;
      for (let i = 0; i < 2; i++) expect(await throughProxy(url, pod)).toBe(502);
      expect(s.guest.requests.length).toBe(guestBefore);
      expect(node().requests.filter((e) => e.route === "ports").length).toBe(portsBefore);
    } finally {
      server.stop(true);
    }
  }, 60_000);
});
