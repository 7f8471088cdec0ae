// Issue 17 cases 6, 7, 9 and 10 against the real sandbox-e2b and the simulator: the probe path cannot be starved by
// callers without a credential; namespaces are DNS-1123 labels and a claim without a `<ns>/` prefix reaches no key;
// per-namespace quotas answer 429 + Retry-After (the SDK's RateLimitError) and show on the metrics listener's /metrics
// (not on the keyless e2b listener: the series name every namespace).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RateLimitError, Sandbox } from "e2b";
import { DOMAIN, KEY_A, KEY_B, ROOT, SECRET, sdkOpts, startStack, type Stack } from "./harness.ts";
import { spawnE2b, spawnService } from "./process.ts";
import { initEnvd } from "#shared/e2b/envd.ts";
import { carriesLaneTag, deriveAccessToken, envdAccessToken, laneTag } from "#shared/e2b/tokens.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { standaloneProxy, unlisted } from "#tests/support/standalone-proxy.ts";
import { until } from "#tests/support/wait.ts";

const KEY_C = "e2b_cccccccccccccccccccccccccccccccccccccccc";
const KEY_D = "e2b_dddddddddddddddddddddddddddddddddddddddd";
const hex = (bytes: number) => randomBytes(bytes).toString("hex");

async function api(s: Stack, method: string, path: string, key: string, body?: unknown) {
  const r = await fetch(`${s.apiUrl}${path}`, { method, headers: { "x-api-key": key, "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

/** A standalone proxy (the chart's sandbox-envd-proxy) over the stack's nodes whose view lists no sandbox yet. */
const unlistedProxy = (s: Stack) =>
  standaloneProxy({ domain: DOMAIN, envdSecret: SECRET, rootToken: ROOT, nodes: () => unlisted(s.mesh.fleet.nodes()) });

/** A GET through the proxy from a chosen local address (the per-client probe budget keys on it). */
function askFrom(localAddress: string, port: number, id: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path: "/health", localAddress, headers: { host: `49983-${id}.${DOMAIN}`, "x-access-token": token } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("case 6: the probe path under anonymous junk", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ pools: ["img:1/none/small=24"] });
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });

  test("a standalone proxy whose view lists nothing yet: 20 fresh sandboxes all work on first use while junk lookups run, and no junk reaches a node", async () => {
    // The chart's sandbox-apiserver + sandbox-envd-proxy: the proxy shares only the envd secret and the fleet, and a
    // new sandbox is not in its inventory yet (here: never), so every first request needs a probe.
    const { server, url: proxy } = unlistedProxy(s);
    const ask = (id: string, token: string) => fetch(`${proxy}/health`, { headers: { host: `49983-${id}.${DOMAIN}`, "x-access-token": token } });
    const junkIds = new Set<string>();
    let junkSent = 0;
    let stop = false;
    // Anonymous junk: well-formed ids with well-formed tokens (64 and 96 hex digits), and malformed ones, 16 at once.
    const junk = async () => {
      while (!stop) {
        const id = `sb_${hex(8)}`;
        junkIds.add(id);
        const token = junkSent % 3 === 0 ? hex(32) : junkSent % 3 === 1 ? hex(48) : "not-a-token";
        junkSent++;
        await ask(id.replace("sb_", "sb-"), token).then((r) => r.arrayBuffer()).catch(() => undefined);
      }
    };
    const loops = Array.from({ length: 16 }, junk);
    try {
      await until(() => junkSent > 500, "the junk loop to get going", 20_000, 10);
      const made = await Promise.all(Array.from({ length: 20 }, () => api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" })));
      expect(made.map((m) => m.status)).toEqual(Array(20).fill(201));
      const firsts = await Promise.all(made.map((m) => ask(String(m.json!.sandboxID), String(m.json!.envdAccessToken)).then((r) => r.status)));
      expect(firsts).toEqual(Array(20).fill(204));
      expect(junkSent).toBeGreaterThan(500);
    } finally {
      stop = true;
      await Promise.all(loops);
      server.stop(true);
    }
    // Not one root read for a junk id reached the node (the old path fanned each out to every node).
    const junkReads = s.cluster.nodes[0]!.requests.filter((e) => e.route === "get" && [...junkIds].some((id) => e.path.includes(id)));
    expect(junkReads).toHaveLength(0);
  }, 120_000);

  test("a holder of many issued tokens: one client address spends at most its own probe budget, a miss is cached, another address still gets through", async () => {
    const { server, port } = unlistedProxy(s);
    const node = s.cluster.nodes[0]!;
    const probeReads = (ids: string[]) => node.requests.filter((e) => e.route === "get" && ids.some((id) => e.path.includes(id))).length;
    try {
      // Tokens that verify for their ids (as the surface would issue them) for ids no node holds, from 127.0.0.2.
      const ghosts = Array.from({ length: 600 }, () => `sb_${hex(8)}`);
      const t0 = performance.now();
      const statuses = await Promise.all(ghosts.map((id) => askFrom("127.0.0.2", port, id.replace("sb_", "sb-"), envdAccessToken(SECRET, id, hex(16)))));
      const seconds = (performance.now() - t0) / 1000;
      expect(statuses.filter((st) => st !== 502)).toEqual([]);
      // Per-client burst 100 plus the 50/s refill over the flood's duration, whatever the machine's speed.
      const probed = ghosts.filter((id) => probeReads([id]) > 0).length;
      expect(probed).toBeGreaterThanOrEqual(100);
      expect(probed).toBeLessThanOrEqual(100 + Math.ceil(50 * seconds) + 1);
      // A ghost asked twice: every node answered 404 the first time, so the miss is cached and the second read
      // nothing from the node.
      // (From an address with its budget intact, so the second ask is not simply refused by the budget.)
      const ghost = `sb_${hex(8)}`;
      const askGhost = () => askFrom("127.0.0.3", port, ghost.replace("sb_", "sb-"), envdAccessToken(SECRET, ghost, hex(16)));
      expect(await askGhost()).toBe(502);
      expect(probeReads([ghost])).toBe(1);
      expect(await askGhost()).toBe(502);
      expect(probeReads([ghost])).toBe(1);
      // A fresh sandbox's first use from another address is not behind that flood.
      const made = await api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" });
      expect(await askFrom("127.0.0.1", port, String(made.json!.sandboxID), String(made.json!.envdAccessToken))).toBe(204);
    } finally {
      server.stop(true);
    }
  }, 120_000);

  test("a token with the id's lane tag but a wrong remainder (issue 31): refused as unknown, nothing reaches the guest, nothing cached for it", async () => {
    const { server, port } = unlistedProxy(s);
    const node = s.cluster.nodes[0]!;
    try {
      const made = await api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" });
      const id = String(made.json!.sandboxID);
      const claimId = id.replace("sb-", "sb_");
      const token = String(made.json!.envdAccessToken);
      const forged = laneTag(SECRET, claimId) + hex(32);
      expect(carriesLaneTag(SECRET, claimId, forged)).toBe(true);
      expect(forged).not.toBe(token);
      const reads = () => node.requests.filter((e) => e.route === "get" && e.path.includes(claimId)).length;
      const guestBefore = s.guest.requests.length;
      const portsBefore = node.requests.filter((e) => e.route === "ports").length;
      // From an address whose probe budget no other test spent. The forged token gets the probe (its tag verifies),
      // which finds the claim; asked again it must get the same answer as an id nobody holds, not a cached owner's.
      const unknownId = `sb_${hex(8)}`;
      expect(await askFrom("127.0.0.4", port, unknownId.replace("sb_", "sb-"), laneTag(SECRET, unknownId) + hex(32))).toBe(502);
      const r0 = reads();
      expect(await askFrom("127.0.0.4", port, id, forged)).toBe(502);
      expect(reads()).toBe(r0 + 1);
      expect(await askFrom("127.0.0.4", port, id, forged)).toBe(502);
      expect(s.guest.requests.length).toBe(guestBefore);
      expect(node.requests.filter((e) => e.route === "ports").length).toBe(portsBefore);
      // The owner was not cached by the forged requests: the issued token's first use still reads the node, the
      // second is answered from the cache.
      const r1 = reads();
      expect(await askFrom("127.0.0.4", port, id, token)).toBe(204);
      expect(reads()).toBe(r1 + 1);
      expect(await askFrom("127.0.0.4", port, id, token)).toBe(204);
      expect(reads()).toBe(r1 + 1);
    } finally {
      server.stop(true);
    }
  }, 60_000);
});

describe("case 7: namespaces are DNS-1123 labels, checked at startup", () => {
  let sim: SandboxdSim;
  let dir: string;
  beforeAll(async () => {
    sim = await startSandboxdSim({ rootToken: ROOT });
    dir = mkdtempSync(join(tmpdir(), "e2b-ns-"));
    writeFileSync(join(dir, "secret"), "s\n");
    writeFileSync(join(dir, "keys"), "k1 team\n");
    writeFileSync(join(dir, "slashed"), "# keys\nk1 team\nk2 team/x\n");
  });
  afterAll(async () => {
    await sim?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const base = (keys = "keys") => [`--sandboxd-seeds=${sim.addr}`, `--sandboxd-token=${ROOT}`, "--e2b-bind-address=127.0.0.1:0", "--e2b-domain=sb.test", `--e2b-envd-secret-file=${join(dir, "secret")}`, `--e2b-api-key-file=${join(dir, keys)}`];
  const outcome = async (child: ReturnType<typeof spawnE2b>) => ({ code: await child.exited, out: child.output().replace(/\\"/g, '"') });

  for (const bad of ["", "team/x", "Team"]) {
    test(`sandbox-e2b --e2b-namespace=${JSON.stringify(bad)} is a usage error (exit 2) naming the flag`, async () => {
      const r = await outcome(spawnE2b([...base(), `--e2b-namespace=${bad}`]));
      expect(r.code).toBe(2);
      expect(r.out).toContain("e2b-namespace");
    });
  }
  test("sandbox-apiserver shares the flag: --e2b-namespace= exits 2 naming it", async () => {
    const child = spawnService("sandbox-apiserver", ["--enable-e2b-api", "--e2b-namespace="]);
    const r = await outcome(child);
    expect(r.code).toBe(2);
    expect(r.out).toContain("e2b-namespace");
  });
  test("a negative default quota is a usage error (exit 2) naming the flag", async () => {
    for (const flag of ["--e2b-default-creates-per-second=-1", "--e2b-default-max-sandboxes=-1", "--e2b-default-snapshots-per-second=-1", "--e2b-default-max-snapshots=-1"]) {
      const r = await outcome(spawnE2b([...base(), flag]));
      expect(r.code).toBe(2);
      expect(r.out).toContain(flag.slice(0, flag.indexOf("=")));
    }
  });
  test("a key-file namespace with a slash exits 1 naming the file and the line", async () => {
    const r = await outcome(spawnE2b(base("slashed")));
    expect(r.code).toBe(1);
    expect(r.out).toContain(`namespace "team/x"`);
    expect(r.out).toContain(`on line 3 of ${join(dir, "slashed")}`);
  });
});

describe("case 10: a claim without a <ns>/ claim_ref reaches no key", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ keys: `${KEY_A} team-a\n${KEY_D}\n` });
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });
  test("listed by the fleet as `default`, it is 404 and unlisted for a default-namespace key", async () => {
    const loose = await new SandboxdClient({ baseUrl: s.cluster.nodes[0]!.url, token: ROOT }).claim({ template: "img:1", claim_ref: "k8s-user-claim" });
    const pub = loose.id.replace("sb_", "sb-");
    await until(() => s.mesh.fleet.nodes().some((n) => n.entries.some((e) => e.id === loose.id)), "the fleet to list the loose claim", 15_000, 25);
    for (const path of [`/sandboxes/${pub}`, `/sandboxes/${pub}/connect`]) {
      const r = await api(s, path.endsWith("connect") ? "POST" : "GET", path, KEY_D, path.endsWith("connect") ? {} : undefined);
      expect(r.status).toBe(404);
      expect(JSON.stringify(r.json)).not.toContain("envdAccessToken");
    }
    const list = await api(s, "GET", "/sandboxes", KEY_D);
    expect(JSON.stringify(list.json)).not.toContain(pub);
  }, 60_000);
});

/** The process's metrics listener (--metrics-bind-address): where the quota series are served. */
async function scrape(s: Stack): Promise<string> {
  expect(s.mesh.metricsPort).toBeDefined();
  return (await fetch(`http://127.0.0.1:${s.mesh.metricsPort}/metrics`)).text();
}

describe("case 9: per-namespace quotas", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({
      pools: ["img:1/none/small=8"],
      keys: `${KEY_A} team-a max-sandboxes=2\n${KEY_B} team-b max-sandboxes=0 creates-per-second=0.2\n${KEY_C} team-c\n`,
      extraFlags: ["--e2b-default-max-sandboxes=1", "--metrics-bind-address=127.0.0.1:0"],
    });
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });

  test("max-sandboxes: the third create and a fork are 429 with Retry-After and the e2b body; a kill frees the slot; /metrics counts", async () => {
    const a1 = await api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" });
    const a2 = await api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" });
    expect([a1.status, a2.status]).toEqual([201, 201]);
    const claimsBefore = s.cluster.nodes[0]!.requests.filter((e) => e.route === "claim" || e.route === "fork").length;
    const a3 = await api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" });
    expect(a3.status).toBe(429);
    expect(a3.json).toEqual({ code: 429, message: expect.stringContaining("max-sandboxes") });
    expect(Number(a3.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const fork = await api(s, "POST", `/sandboxes/${a1.json!.sandboxID}/fork`, KEY_A, { count: 1 });
    expect(fork.status).toBe(429);
    expect(fork.headers.get("retry-after")).not.toBeNull();
    // Refused before any claim: the node saw no claim or fork for them.
    expect(s.cluster.nodes[0]!.requests.filter((e) => e.route === "claim" || e.route === "fork").length).toBe(claimsBefore);
    const metrics = await scrape(s);
    expect(metrics).toContain('e2b_namespace_sandboxes{namespace="team-a"} 2');
    expect(metrics).toContain('e2b_namespace_quota_max_sandboxes{namespace="team-a"} 2');
    expect(metrics).toMatch(/e2b_quota_rejections_total\{namespace="team-a",quota="max-sandboxes"\} 2/);
    // The default flag applies to a namespace whose line sets nothing.
    expect(metrics).toContain('e2b_namespace_quota_max_sandboxes{namespace="team-c"} 1');
    expect((await api(s, "DELETE", `/sandboxes/${a2.json!.sandboxID}`, KEY_A)).status).toBe(204);
    expect((await api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" })).status).toBe(201);
  }, 60_000);

  test("creates-per-second: the second create within the second is 429 with Retry-After; a line's max-sandboxes=0 lifts the default", async () => {
    const b1 = await api(s, "POST", "/sandboxes", KEY_B, { templateID: "base" });
    expect(b1.status).toBe(201);
    const b2 = await api(s, "POST", "/sandboxes", KEY_B, { templateID: "base" });
    expect(b2.status).toBe(429);
    expect(b2.json).toEqual({ code: 429, message: expect.stringContaining("creates-per-second") });
    expect(b2.headers.get("retry-after")).toBe("5");
    const metrics = await scrape(s);
    expect(metrics).toContain('e2b_quota_rejections_total{namespace="team-b",quota="creates-per-second"} 1');
    expect(metrics).toContain('e2b_namespace_quota_max_sandboxes{namespace="team-b"} 0');
  }, 60_000);

  test("the quota series (every namespace's name and count) are not on the e2b listener, with or without a key", async () => {
    const keyless = await fetch(`${s.apiUrl}/metrics`);
    expect(keyless.status).toBe(401);
    expect(await keyless.text()).not.toContain("e2b_namespace");
    const keyed = await api(s, "GET", "/metrics", KEY_C);
    expect(keyed.status).toBe(404);
    expect(JSON.stringify(keyed.json)).not.toContain("team-a");
    expect(await scrape(s)).toContain('e2b_namespace_quota_max_sandboxes{namespace="team-a"} 2');
  });

  test("the e2b SDK sees the 429 as its RateLimitError", async () => {
    await Sandbox.create("base", { ...sdkOpts(s, KEY_C), requestTimeoutMs: 3_000 });
    const err = await Sandbox.create("base", { ...sdkOpts(s, KEY_C), requestTimeoutMs: 3_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
  }, 60_000);
});

describe("--help names the quota flags in both binaries that serve the surface", () => {
  for (const binary of ["sandbox-e2b", "sandbox-apiserver"] as const) {
    test(binary, async () => {
      const child = spawnService(binary, ["--help"]);
      expect(await child.exited).toBe(0);
      for (const flag of ["--e2b-default-max-sandboxes", "--e2b-default-creates-per-second", "--e2b-default-max-snapshots", "--e2b-default-snapshots-per-second", "max-sandboxes=N", "max-snapshots=N"]) expect(child.output()).toContain(flag);
    });
  }
});

describe("case 10: tags and node error texts (/openapi.json: tests/unit/shared/e2b/app.test.ts)", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ pools: ["img:1/none/small=4"] });
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });

  test("tag names the node would refuse are 400 naming the field, not 500; 17 tags on one template are a 400", async () => {
    const sbx = await api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" });
    await new SandboxdClient({ baseUrl: s.cluster.nodes[0]!.url, token: ROOT }).promote(String(sbx.json!.sandboxID).replace("sb-", "sb_"), { template: "e2b/team-a/tagged" });
    await until(() => s.mesh.fleet.nodes().some((n) => n.templates.some((t) => t.template === "e2b/team-a/tagged")), "the built template in the view", 15_000, 25);
    for (const tag of ["a=b", "with space", "x".repeat(129), "a&b", "v:1"]) {
      const r = await api(s, "POST", "/templates/tags", KEY_A, { target: "tagged", tags: [tag] });
      expect(r.status).toBe(400);
      expect(String(r.json!.message)).toStartWith("tags:");
    }
    const many = Array.from({ length: 17 }, (_, i) => `t${i}`);
    const r = await api(s, "POST", "/templates/tags", KEY_A, { target: "tagged", tags: many });
    expect(r.status).toBe(400);
    expect(String(r.json!.message)).toStartWith("tags:");
    expect((await api(s, "POST", "/templates/tags", KEY_A, { target: "tagged", tags: ["v1"] })).status).toBe(201);
  }, 60_000);

  test("a node's own error text never reaches the client: a 409 keeps its status with a generic message", async () => {
    const sbx = await api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" });
    const node = s.cluster.nodes[0]!;
    node.fail("renew", 409, { error: "tenant team-secret holds 12 of 12 claims on node-7" }, 1);
    const r = await api(s, "POST", `/sandboxes/${sbx.json!.sandboxID}/timeout`, KEY_A, { timeout: 60 });
    expect(r.status).toBe(409);
    expect(JSON.stringify(r.json)).not.toContain("team-secret");
    expect(JSON.stringify(r.json)).not.toContain("node-7");
    expect(r.json).toEqual({ code: 409, message: expect.stringContaining("failed to extend the sandbox lease") });
  }, 60_000);
});

describe("tokens across the upgrade to lane tags", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ guestAgents: true, proxy: true });
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });

  test("a sandbox whose envd holds the untagged token (made before tags) gets that token back from connect, and the proxy admits it; a new one gets the tagged form", async () => {
    const node = s.cluster.nodes[0]!;
    const old = await new SandboxdClient({ baseUrl: node.url, token: ROOT }).claim({ template: "img:1", claim_ref: "team-a/e2b-before-tags" });
    const untagged = deriveAccessToken(SECRET, old.token);
    await initEnvd({ address: node.addr, claimId: old.id, rootToken: ROOT }, { accessToken: untagged, timestamp: new Date().toISOString() });
    const pub = old.id.replace("sb_", "sb-");
    const connected = await api(s, "POST", `/sandboxes/${pub}/connect`, KEY_A, {});
    expect(connected.status).toBe(200);
    expect(connected.json!.envdAccessToken).toBe(untagged);
    await until(() => s.mesh.fleet.nodes().some((n) => n.entries.some((e) => e.id === old.id)), "the fleet to list the old sandbox", 15_000, 25);
    const r = await fetch(`${s.proxyUrl}/envs`, { headers: { host: `49983-${pub}.${DOMAIN}`, "x-access-token": untagged } });
    expect(r.status).toBe(200);
    const made = await api(s, "POST", "/sandboxes", KEY_A, { templateID: "base" });
    const again = await api(s, "POST", `/sandboxes/${made.json!.sandboxID}/connect`, KEY_A, {});
    expect(again.json!.envdAccessToken).toBe(made.json!.envdAccessToken);
    expect(String(made.json!.envdAccessToken)).toHaveLength(96);
  }, 60_000);
});
