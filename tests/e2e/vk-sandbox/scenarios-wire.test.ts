// Spec §11 scenarios proven on the daemon process as a whole, by what crosses its two wires: what it sends sandboxd
// (read by a recording proxy in front of the simulator: the exact Authorization header, the claim bodies), what it
// writes to a real kube-apiserver, what it serves on its kubelet port (TLS and routes), its claims table on disk
// and its audit log lines. One apiserver, one simulator and one shared daemon for the file; scenario 9's refused
// key pair is a second, short-lived process.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { selfSignedServingCert } from "#shared/tls/index.ts";
import { freePorts } from "../../kube/ports.ts";
import { peer } from "../../integration/vk-sandbox/tls-peer.ts";
import { CLAIM_ID, runningWithClaim, sandboxPod, startE2eCluster, type E2eCluster } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import { Daemon } from "./daemon.ts";
import { SANDBOXD_TOKEN, simClaimsFor, startStack, type Stack } from "./stack.ts";

const NODE = "vk-wire";
const NODE_IP = "10.1.2.3";

let e2e: E2eCluster;
let stack: Stack;
let daemon: Daemon;
let statePath: string;

/** What reached sandboxd, exactly as the daemon sent it. */
interface Seen {
  method: string;
  path: string;
  authorization: string | null;
  body: unknown;
}
const seen: Seen[] = [];
let recorder: ReturnType<typeof Bun.serve> | undefined;

function startRecorder(target: string): string {
  recorder = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const u = new URL(req.url);
      const raw = req.method === "GET" ? undefined : await req.arrayBuffer();
      let body: unknown;
      if (raw && raw.byteLength) {
        try {
          body = JSON.parse(new TextDecoder().decode(raw));
        } catch {
          body = new TextDecoder().decode(raw);
        }
      }
      seen.push({ method: req.method, path: u.pathname, authorization: req.headers.get("authorization"), body });
      const r = await fetch(`${target}${u.pathname}${u.search}`, { method: req.method, headers: req.headers, body: raw });
      return new Response(r.body, { status: r.status, headers: r.headers });
    },
  });
  return `http://127.0.0.1:${recorder.port}`;
}

beforeAll(async () => {
  e2e = await startE2eCluster();
  stack = await startStack(e2e, { pools: ["base=80"] });
  // The stack's token file holds "  node-root-token\n": surrounding whitespace the daemon must trim (scenario 14).
  expect(readFileSync(stack.tokenFile, "utf8")).toBe(`  ${SANDBOXD_TOKEN}\n`);
  const url = startRecorder(stack.sim.url);
  statePath = join(mkdtempSync(join(tmpdir(), "vk-e2e-wire-")), "state", "claims.json");
  const port = freePorts(1)[0]!;
  daemon = Daemon.start({
    args: [
      `--node-name=${NODE}`,
      `--node-ip=${NODE_IP}`,
      `--listen-addr=127.0.0.1:${port}`,
      `--sandboxd-url=${url}`,
      `--sandboxd-token-file=${stack.tokenFile}`,
      `--state-path=${statePath}`,
      `--client-ca-file=${e2e.cluster.clientCaFile}`,
      "--publish-inventory",
      "--publish-interval=1s",
      // Scenario 42 is the seed's one-object form; the default sharded form (docs/inventory.md) has its own tests.
      "--inventory-format=single",
      "--orphan-scan-interval=1s",
    ],
    env: { KUBECONFIG: e2e.nodeKubeconfig(NODE), VK_LOG_LEVEL: "debug" },
  });
  daemon.port = port;
  await daemon.waitForLog(/vk-sandbox ready/, 60_000);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await recorder?.stop(true);
  await e2e?.stop();
});

const running = (name: string) => runningWithClaim(e2e.kube, "ns", name);
const table = (): { claims: Record<string, { id: string; token: string; podUID: string }> } => JSON.parse(readFileSync(statePath, "utf8"));
// The routes are read as kube-apiserver reads them: with its kubelet client certificate, which the daemon's
// --client-ca-file verifies (anonymous callers get 401: tests/integration/vk-sandbox/kubelet-api-auth.test.ts).
const kubelet = (path: string, init: RequestInit = {}) =>
  fetch(`https://127.0.0.1:${daemon.port}${path}`, {
    ...init,
    redirect: "manual",
    tls: { rejectUnauthorized: false, cert: e2e.cluster.kubeletClient.certPem, key: e2e.cluster.kubeletClient.keyPem },
  });
/**
 * Claim bodies for a pod key, without the `metadata` map the project adds beyond §5.2 step 7 (its recovery
 * labels, documented in docs/provider.md); every member the spec names is compared exactly.
 */
const claimBodies = (ref: string) =>
  seen
    .filter((s) => s.path === "/v1/claim" && (s.body as { claim_ref?: string })?.claim_ref === ref)
    .map((s) => {
      const { metadata: _m, ...spec } = s.body as Record<string, unknown>;
      return spec;
    });

/** A sandbox claimed behind the daemon's back, straight from the simulator. */
async function claimDirect(body: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const r = await fetch(`${stack.sim.url}/v1/claim`, {
    method: "POST",
    headers: { authorization: `Bearer ${SANDBOXD_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ template: "base", ...body }),
  });
  expect(r.status).toBe(200);
  return (await r.json()) as { id: string; token: string };
}

describe("scenarios on the daemon's wires", () => {
  test("scenario 16: a pod with a template and no ttl: the claim asks 86400 s for ns/name and the pod shows the §5.7 Running status with claim-id", async () => {
    await e2e.kube.createPod(sandboxPod("s16", NODE, { annotations: { "sandbox.cocoonstack.io/net": "" } }));
    const pod = await running("s16");
    expect(claimBodies("ns/s16")).toEqual([{ template: "base", ttl_seconds: 86_400, claim_ref: "ns/s16" }]);
    const live = simClaimsFor(stack.sim, "ns/s16");
    expect(live).toHaveLength(1);
    const id = live[0]!.id;
    expect(pod.metadata?.annotations?.[CLAIM_ID]).toBe(id);
    expect(table().claims["ns/s16"]?.id).toBe(id);
    // §5.7: host and pod IP from the claim's owner_addr, startTime = claimedAt, three True conditions, one
    // running container status per container with the sandboxd image id. The release token is not on the Pod.
    const host = stack.sim.addr.split(":")[0]!;
    const st = pod.status!;
    expect(st.hostIP).toBe(host);
    expect(st.podIP).toBe(host);
    expect(st.podIPs).toEqual([{ ip: host }]);
    expect(Math.abs(Date.parse(String(st.startTime)) - live[0]!.claimedAt)).toBeLessThan(1_000);
    const conds = Object.fromEntries((st.conditions ?? []).map((c) => [c.type, c.status]));
    expect(conds).toMatchObject({ Initialized: "True", Ready: "True", PodScheduled: "True" });
    expect(st.containerStatuses).toHaveLength(1);
    expect(st.containerStatuses![0]).toMatchObject({ name: "main", image: "sandbox", ready: true, imageID: `sandboxd://${id}` });
    expect(String(st.containerStatuses![0]!.state?.running?.startedAt)).toBe(String(st.startTime));
    expect(JSON.stringify(pod)).not.toContain(live[0]!.token);
  }, 60_000);

  test('scenario 17: ttl-seconds "0" sends a claim body without ttl_seconds', async () => {
    await e2e.kube.createPod(sandboxPod("s17", NODE, { annotations: { "sandbox.cocoonstack.io/ttl-seconds": "0" } }));
    await running("s17");
    expect(claimBodies("ns/s17")).toEqual([{ template: "base", claim_ref: "ns/s17" }]);
  }, 60_000);

  test('scenario 14: token file "  tok\\n": claim, list and info carry "Bearer tok"; the release carries the claim\'s own token', async () => {
    await e2e.kube.createPod(sandboxPod("s14", NODE));
    await running("s14");
    const claimToken = simClaimsFor(stack.sim, "ns/s14")[0]!.token;
    expect(claimToken).not.toBe(SANDBOXD_TOKEN);
    // info comes from the inventory publisher (1 s), list from it and the orphan scan (1 s).
    await waitFor("info and list seen", async () => seen.some((s) => s.path === "/v1/info") && seen.some((s) => s.path === "/v1/sandboxes"));
    await e2e.kube.deletePod("ns", "s14");
    await waitFor("released", async () => simClaimsFor(stack.sim, "ns/s14").length === 0, 20_000);
    const nodeCalls = seen.filter((s) => s.path === "/v1/claim" || s.path === "/v1/sandboxes" || s.path === "/v1/info");
    expect(new Set(nodeCalls.map((s) => s.path))).toEqual(new Set(["/v1/claim", "/v1/sandboxes", "/v1/info"]));
    expect(new Set(nodeCalls.map((s) => s.authorization))).toEqual(new Set([`Bearer ${SANDBOXD_TOKEN}`]));
    const releases = seen.filter((s) => /^\/v1\/sandboxes\/[^/]+\/release$/.test(s.path));
    expect(releases.length).toBeGreaterThanOrEqual(1);
    for (const r of releases) expect(r.authorization).not.toBe(`Bearer ${SANDBOXD_TOKEN}`);
    expect(releases.at(-1)!.authorization).toBe(`Bearer ${claimToken}`);
  }, 60_000);

  test("scenario 23: 50 concurrent creates leave a valid JSON file with 50 rows matching the pods' claim-id annotations", async () => {
    await e2e.cluster.createNamespace("fifty");
    const names = Array.from({ length: 50 }, (_, i) => `f${i}`);
    await Promise.all(names.map((n) => e2e.kube.createPod(sandboxPod(n, NODE, { ns: "fifty" }))));
    const pods = await waitFor(
      "50 Running with claim ids",
      async () => {
        const all = await e2e.kube.pods("fifty");
        return all.filter((p) => p.status?.phase === "Running" && p.metadata?.annotations?.[CLAIM_ID]).length === 50 && all;
      },
      90_000,
      250,
    );
    const text = readFileSync(statePath, "utf8");
    const file = JSON.parse(text) as ReturnType<typeof table>;
    const rows = Object.entries(file.claims).filter(([k]) => k.startsWith("fifty/"));
    expect(rows).toHaveLength(50);
    for (const p of pods as V1Pod[]) {
      const row = file.claims[`fifty/${p.metadata!.name}`]!;
      expect(row.id).toBe(p.metadata!.annotations![CLAIM_ID]!);
      expect(row.podUID).toBe(p.metadata!.uid!);
      expect(simClaimsFor(stack.sim, `fifty/${p.metadata!.name}`).map((c) => c.id)).toEqual([row.id]);
    }
    expect(new Set(rows.map(([, r]) => r.id)).size).toBe(50);
  }, 120_000);

  test("scenario 41: an unclaimed sandbox without claim_ref is logged once as orphan and never released; with claim_ref it is external; a failed listing skips the cycle", async () => {
    const orphan = await claimDirect({});
    const external = await claimDirect({ claim_ref: "elsewhere/x" });
    const lines = (re: RegExp) => daemon.log().split("\n").filter((l) => re.test(l));
    await daemon.waitForLog(new RegExp(`sandbox ${orphan.id} is orphan`), 10_000);
    await daemon.waitForLog(new RegExp(`sandbox ${external.id} is external`), 10_000);
    expect(lines(new RegExp(`sandbox ${external.id} is external`))[0]).toContain('"claimRef":"elsewhere/x"');
    await Bun.sleep(3_500); // three more 1 s cycles
    expect(lines(new RegExp(`sandbox ${orphan.id} is orphan`))).toHaveLength(1);

    // A failed listing is not an empty list: held rows are not called stale and the verdicts are kept, so the
    // cycle after recovery logs nothing new.
    const skipped = lines(/orphan scan: sandboxd listing failed; cycle skipped/).length;
    stack.sim.listFails("500");
    await waitFor("a skipped cycle", async () => lines(/orphan scan: sandboxd listing failed; cycle skipped/).length > skipped, 10_000);
    stack.sim.listFails(false);
    await Bun.sleep(2_500);
    expect(lines(/ is stale/)).toEqual([]);
    expect(lines(new RegExp(`sandbox ${orphan.id} is (orphan|no longer)`))).toHaveLength(1);
    expect(seen.filter((s) => s.path.includes(orphan.id) || s.path.includes(external.id))).toEqual([]);
    expect(stack.sim.claims().map((c) => c.id)).toEqual(expect.arrayContaining([orphan.id, external.id]));
  }, 60_000);

  test("scenario 9 (process): with no cert files the kubelet port serves a self-signed cert naming the node, the node IP and 127.0.0.1", async () => {
    const { cert } = await peer(daemon.port);
    expect(cert.subject.CN).toBe("vk-sandbox");
    expect((cert.subjectaltname ?? "").split(", ").sort()).toEqual([`DNS:${NODE}`, `IP Address:${NODE_IP}`, "IP Address:127.0.0.1"].sort());
  });

  test("scenario 9 (process): a mismatched cert/key pair stops startup and registers no Node", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vk-e2e-pair-"));
    const a = await selfSignedServingCert({ cn: "a" });
    const b = await selfSignedServingCert({ cn: "b" });
    writeFileSync(join(dir, "a.crt"), a.certPem);
    writeFileSync(join(dir, "b.key"), b.keyPem);
    const d = Daemon.start({
      args: [
        "--node-name=vk-badpair",
        `--listen-addr=127.0.0.1:${freePorts(1)[0]}`,
        `--sandboxd-url=${stack.gate.url}`,
        `--sandboxd-token-file=${stack.tokenFile}`,
        `--state-path=${join(dir, "state", "claims.json")}`,
        `--tls-cert=${join(dir, "a.crt")}`,
        `--tls-key=${join(dir, "b.key")}`,
      ],
      env: { KUBECONFIG: e2e.nodeKubeconfig("vk-badpair") },
    });
    expect(await d.exitCode()).toBe(1); // a fatal startup error, not a usage error
    expect(d.log()).toMatch(/kubelet TLS/); // refused for the pair, not for something else
    expect((await e2e.kube.node("vk-badpair")).status).toBe(404);
  }, 60_000);

  test("scenario 10 (process): the kubelet port refuses TLS 1.1 and serves TLS 1.2 without a client certificate", async () => {
    await expect(peer(daemon.port, { minVersion: "TLSv1", maxVersion: "TLSv1.1", ciphers: "DEFAULT:@SECLEVEL=0" })).rejects.toThrow();
    const ok = await peer(daemon.port, { minVersion: "TLSv1.2", maxVersion: "TLSv1.2" });
    expect(ok.protocol).toBe("TLSv1.2");
  });

  test("scenario 45 (process): /pods, /runningpods/, /stats/summary, /metrics/resource, /containerLogs 500, /nope 404, POST /pods 405", async () => {
    await e2e.kube.createPod(sandboxPod("s45", NODE));
    await running("s45");
    const pods = (await (await kubelet("/pods")).json()) as { kind: string; apiVersion: string; items: V1Pod[] };
    expect(pods).toMatchObject({ kind: "PodList", apiVersion: "v1" });
    expect(pods.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`)).toContain("ns/s45");
    expect(pods.items.every((p) => p.spec?.nodeName === NODE)).toBe(true);
    const runningPods = (await (await kubelet("/runningpods/")).json()) as { kind: string; items: V1Pod[] };
    expect(runningPods.kind).toBe("PodList");
    expect(runningPods.items.map((p) => p.metadata?.name)).toContain("s45");
    const stats = await kubelet("/stats/summary");
    expect(stats.status).toBe(200);
    expect(await stats.json()).toEqual({ node: { nodeName: "", startTime: null }, pods: null });
    const metrics = await kubelet("/metrics/resource");
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get("content-type")).toBe("text/plain; version=0.0.4");
    expect(await metrics.text()).toBe("");
    const logs = await kubelet("/containerLogs/ns/s45/main");
    expect(logs.status).toBe(500);
    expect(await logs.text()).toContain("vk-sandbox: not implemented; use the sandbox SDK for interactive access");
    const nope = await kubelet("/nope");
    expect(nope.status).toBe(404);
    expect(await nope.text()).toBe("404 request not found");
    expect((await kubelet("/pods", { method: "POST" })).status).toBe(405);
  }, 60_000);
  test("scenario 42 (process): NodeInventory <node> has node, address, pools, sorted entries, field manager vk-sandbox, a Node ownerRef and an advancing publishedAt", async () => {
    type Inv = {
      node: string;
      address: string;
      pools?: { template: string; warm: number; target: number }[];
      entries?: { name: string; id: string; phase: string; addr?: string }[];
      publishedAt: string;
      metadata: { ownerReferences?: unknown[]; managedFields?: { manager: string; operation: string }[] };
    };
    const get = async () => (await e2e.kube.req<Inv>("GET", `/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/${NODE}`)).body;
    // A Pod of its own: under --randomize this test may run before any other created one.
    await e2e.kube.createPod(sandboxPod("s42", NODE));
    await running("s42");
    const held = Object.entries(table().claims);
    const inv = await waitFor("inventory with our claims", async () => {
      const got = await get();
      return held.every(([, r]) => got?.entries?.some((e) => e.id === r.id)) && got;
    });
    const node = await e2e.kube.node(NODE);
    expect(inv.node).toBe(NODE);
    expect(inv.address).toBe(`127.0.0.1:${recorder!.port}`); // default: host:port of --sandboxd-url
    expect(inv.pools?.map((p) => p.template)).toContain("base");
    const names = inv.entries!.map((e) => e.name);
    expect(names).toEqual([...names].sort());
    for (const [key, r] of held) expect(inv.entries!.find((e) => e.id === r.id)).toMatchObject({ name: key, phase: "Running", addr: stack.sim.addr });
    expect(inv.metadata.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: NODE, uid: (node.body as unknown as { metadata: { uid: string } }).metadata.uid }]);
    expect(inv.metadata.managedFields?.map((m) => `${m.manager}/${m.operation}`)).toContain("vk-sandbox/Apply");
    const next = await waitFor("publishedAt advances", async () => {
      const got = await get();
      return Date.parse(got.publishedAt) > Date.parse(inv.publishedAt) && got;
    }, 10_000, 200);
    expect(Date.parse(next.publishedAt)).toBeGreaterThan(Date.parse(inv.publishedAt));

    // Scenario 43 (process): with /v1/sandboxes failing nothing is applied and publishedAt stalls; then it resumes.
    const skipped = () => daemon.log().split("\n").filter((l) => l.includes("sandboxd listing or info failed; skipping this inventory publish")).length;
    const skipped0 = skipped();
    stack.sim.listFails("500");
    try {
      // The publish loop is serial: once one publish has failed its reads, a publish already past them has landed
      // (waiting on that, not on a fixed 2 s, which a loaded machine can outlast).
      await waitFor("a publish skipped for the failing listing", () => skipped() > skipped0, 15_000, 50);
      const stalled = (await get()).publishedAt;
      await waitFor("three more skipped publishes", () => skipped() >= skipped0 + 4, 15_000, 50);
      expect((await get()).publishedAt).toBe(stalled);
    } finally {
      stack.sim.listFails(false);
    }
  }, 90_000);
});
