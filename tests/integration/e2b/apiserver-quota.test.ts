// The quota flags are shared (shared/config/common-flags.ts): sandbox-apiserver with --enable-e2b-api enforces a
// key line's max-sandboxes and the default rate from --e2b-default-creates-per-second, answers 429 with the e2b body
// and Retry-After (the SDK's RateLimitError), and reports the counts on its own /metrics (secure port, behind its
// SubjectAccessReview), never on the keyless e2b listener: the series name every namespace. Snapshots count too
// (issue 27): a line's max-snapshots refuses the next checkpoint before the node is asked.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RateLimitError, Sandbox } from "e2b";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { freePorts } from "../../kube/ports.ts";
import { startTestGuest, type TestGuest } from "./guest.ts";
import { type Stack, startStack } from "../sandbox-apiserver/fixture.ts";
import { e2bServerArgs, publishSimNode, writeE2bFiles } from "#tests/support/e2b-apiserver.ts";

const ROOT = "root-e2b-quota";
const KEY_ONE = "e2b_1111111111111111111111111111111111111111";
const KEY_RATE = "e2b_2222222222222222222222222222222222222222";
const KEY_SNAP = "e2b_3333333333333333333333333333333333333333";
let stack: Stack;
let sim: SandboxdSim;
let guest: TestGuest;

beforeAll(async () => {
  stack = await startStack();
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img:1/none/small=4"] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  writeE2bFiles(stack.dir, `${KEY_ONE} team-one max-sandboxes=1 creates-per-second=0\n${KEY_RATE} team-rate\n${KEY_SNAP} team-snap max-snapshots=1\n`);
}, 60_000);

afterAll(async () => {
  await sim?.stop();
  await guest?.stop();
  await stack?.stop();
});

describe("sandbox-apiserver --enable-e2b-api: per-namespace quotas", () => {
  test("max-sandboxes from the key line and the default rate from the flag: 429 + Retry-After, RateLimitError, /metrics", async () => {
    await publishSimNode(stack, sim);
    const [e2bPort] = freePorts(1);
    const server = await stack.startServer({ args: e2bServerArgs({ rootToken: ROOT, port: e2bPort, dir: stack.dir }, "--e2b-default-creates-per-second=0.1") });
    const api = `http://127.0.0.1:${e2bPort}`;
    const create = (key: string) => fetch(`${api}/sandboxes`, { method: "POST", headers: { "x-api-key": key, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base" }) });
    try {
      expect((await create(KEY_ONE)).status).toBe(201);
      const over = await create(KEY_ONE);
      expect(over.status).toBe(429);
      expect(over.headers.get("retry-after")).toBe("5");
      expect(await over.json()).toEqual({ code: 429, message: expect.stringContaining("max-sandboxes") });
      expect(sim.claims()).toHaveLength(1);
      // team-rate: no line of its own, so --e2b-default-creates-per-second=0.1 (one start, then one per 10 s).
      const opts = { apiKey: KEY_RATE, apiUrl: api, domain: "sb.test", requestTimeoutMs: 3_000 };
      await Sandbox.create("base", opts);
      const err = await Sandbox.create("base", opts).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RateLimitError);
      const onE2b = await fetch(`${api}/metrics`);
      expect(onE2b.status).toBe(401);
      expect(await onE2b.text()).not.toContain("team-one");
      // Anonymous on the secure port: refused like every non-resource URL without a grant.
      const tls = { ca: stack.caPem, cert: stack.cluster.admin.certPem, key: stack.cluster.admin.keyPem };
      expect((await fetch(`https://127.0.0.1:${server.port}/metrics`, { tls: { ca: stack.caPem } })).status).toBe(403);
      const scraped = await fetch(`https://127.0.0.1:${server.port}/metrics`, { tls });
      expect(scraped.status).toBe(200);
      const metrics = await scraped.text();
      expect(metrics).toContain('e2b_quota_rejections_total{namespace="team-one",quota="max-sandboxes"} 1');
      expect(metrics).toContain('e2b_quota_rejections_total{namespace="team-rate",quota="creates-per-second"} 1');
      expect(metrics).toContain('e2b_namespace_quota_creates_per_second{namespace="team-rate"} 0.1');
      expect(metrics).toContain('e2b_namespace_sandboxes{namespace="team-one"} 1');
    } finally {
      await server.stop();
    }
  }, 120_000);

  test("max-snapshots from the key line: the second snapshot is 429 + Retry-After before any checkpoint; /metrics counts it", async () => {
    await publishSimNode(stack, sim);
    const [e2bPort] = freePorts(1);
    const server = await stack.startServer({ args: e2bServerArgs({ rootToken: ROOT, port: e2bPort, dir: stack.dir }) });
    const api = `http://127.0.0.1:${e2bPort}`;
    const post = (path: string, body: unknown) => fetch(`${api}${path}`, { method: "POST", headers: { "x-api-key": KEY_SNAP, "content-type": "application/json" }, body: JSON.stringify(body) });
    try {
      const created = await post("/sandboxes", { templateID: "base" });
      expect(created.status).toBe(201);
      const { sandboxID } = (await created.json()) as { sandboxID: string };
      expect((await post(`/sandboxes/${sandboxID}/snapshots`, { name: "one" })).status).toBe(201);
      const checkpoints = sim.requests.filter((e) => e.route === "checkpoint").length;
      const over = await post(`/sandboxes/${sandboxID}/snapshots`, { name: "two" });
      expect(over.status).toBe(429);
      expect(over.headers.get("retry-after")).toBe("5");
      expect(await over.json()).toEqual({ code: 429, message: "namespace quota exceeded: 1 of 1 snapshots kept (max-snapshots); delete one (Sandbox.deleteSnapshot) or retry later" });
      expect(sim.requests.filter((e) => e.route === "checkpoint").length).toBe(checkpoints);
      const tls = { ca: stack.caPem, cert: stack.cluster.admin.certPem, key: stack.cluster.admin.keyPem };
      const metrics = await (await fetch(`https://127.0.0.1:${server.port}/metrics`, { tls })).text();
      expect(metrics).toContain('e2b_quota_rejections_total{namespace="team-snap",quota="max-snapshots"} 1');
      expect(metrics).toContain('e2b_namespace_quota_max_snapshots{namespace="team-snap"} 1');
    } finally {
      await server.stop();
    }
  }, 120_000);
});
