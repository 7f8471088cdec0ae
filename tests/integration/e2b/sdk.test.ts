// The real e2b SDK (2.51.0) against sandbox-e2b + simulated sandboxd nodes: the SDK calls of docs/e2b.md's table,
// each named after its scenario.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox, SandboxNotFoundError, Template } from "e2b";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { DOMAIN, KEY_A, KEY_B, ROOT, SECRET, sdkOpts, startStack, type Stack } from "./harness.ts";
import { until } from "#tests/support/wait.ts";
import { envdAccessToken } from "#shared/e2b/tokens.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack();
});
afterAll(async () => {
  await s.stop();
});

const claimOf = (publicId: string) => s.cluster.nodes.flatMap((n) => n.claims()).find((c) => c.id === publicId.replace(/^sb-/, "sb_"));

describe("create", () => {
  test("create_default_alias_base: Sandbox.create('base') claims the alias's image and initialises envd", async () => {
    const inits = s.guest.inits.length;
    const sbx = await Sandbox.create("base", sdkOpts(s));
    expect(sbx.sandboxId).toMatch(/^sb-[0-9a-f]+$/);
    const claim = claimOf(sbx.sandboxId)!;
    expect(claim.key).toEqual({ template: "img:1", net: "none", size: "small" });
    expect(claim.claimRef).toMatch(/^team-a\/e2b-/);
    // Acceptance 15: the access token is HMAC-SHA256(secret, claim token).
    expect((sbx as unknown as { envdAccessToken: string }).envdAccessToken).toBe(envdAccessToken(SECRET, claim.id, claim.token));
    expect(s.guest.inits.length).toBe(inits + 1);
    expect(s.guest.inits.at(-1)).toMatchObject({ accessToken: envdAccessToken(SECRET, claim.id, claim.token), defaultUser: "user" });
    const info = await sbx.getInfo();
    expect(info.templateId).toBe("img:1");
    expect(info.name).toBe("base");
    expect(info.sandboxDomain).toBe(DOMAIN);
    await sbx.kill();
  });

  test("create_timeout_metadata: timeoutMs and metadata reach the claim", async () => {
    const before = Date.now();
    const sbx = await Sandbox.create("img:1", { ...sdkOpts(s), timeoutMs: 60_000, metadata: { user: "abc", run: "7" } });
    const claim = claimOf(sbx.sandboxId)!;
    // The create's public-ports choice rides on the claim too (shared/envd-token/traffic.ts); replies never show it.
    expect(claim.metadata).toEqual({ user: "abc", run: "7", "vk-sandbox.public-traffic": "true" });
    const info = await sbx.getInfo();
    expect(info.metadata).toEqual({ user: "abc", run: "7" });
    const lease = info.endAt.getTime() - before;
    expect(lease).toBeGreaterThan(55_000);
    expect(lease).toBeLessThan(65_000);
    await sbx.kill();
  });

  test("create_egress_lane: allowInternetAccess:true claims net egress", async () => {
    const sbx = await Sandbox.create("img:1", { ...sdkOpts(s), allowInternetAccess: true });
    expect(claimOf(sbx.sandboxId)!.key.net).toBe("egress");
    await sbx.kill();
  });

  test("create_envvars_reach_init: envs are sent to envd /init", async () => {
    const sbx = await Sandbox.create("base", { ...sdkOpts(s), envs: { FOO: "bar" } });
    const init = s.guest.inits.at(-1)!;
    expect(init.envVars?.FOO).toBe("bar");
    await sbx.kill();
  });

  test("unknown template => 404 template not found", async () => {
    const err = await Sandbox.create("no-such-image", sdkOpts(s)).catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(String(err.message)).toBe('404: template "no-such-image" not found');
  });

  test("wrong key => 401 invalid API key, no claim sent", async () => {
    const claims = s.cluster.nodes[0]!.claims().length;
    const err = await Sandbox.create("base", sdkOpts(s, "e2b_wrong")).catch((e) => e);
    expect(String(err.message)).toContain("invalid API key");
    expect(s.cluster.nodes[0]!.claims().length).toBe(claims);
  });
});

describe("lifecycle", () => {
  test("kill_then_kill_false: kill returns true, then false; getInfo throws SandboxNotFoundError", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    expect(await Sandbox.kill(sbx.sandboxId, sdkOpts(s))).toBe(true);
    expect(await Sandbox.kill(sbx.sandboxId, sdkOpts(s))).toBe(false);
    expect(await Sandbox.getInfo(sbx.sandboxId, sdkOpts(s)).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
  });

  test("set_timeout_renews: setTimeout(3600000) renews the node lease to 3600 s", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    await sbx.setTimeout(3_600_000);
    const info = await sbx.getInfo();
    const left = info.endAt.getTime() - Date.now();
    expect(left).toBeGreaterThan(3_590_000);
    expect(left).toBeLessThanOrEqual(3_601_000);
    await sbx.kill();
  });

  test("get_info_live_state + pause_twice_false + resume_via_connect", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    expect((await sbx.getInfo()).state).toBe("running");
    expect(await sbx.pause()).toBe(true);
    expect((await sbx.getInfo()).state).toBe("paused");
    expect(await sbx.pause()).toBe(false);
    const again = await Sandbox.connect(sbx.sandboxId, sdkOpts(s));
    expect((await again.getInfo()).state).toBe("running");
    // The token handed out by connect is the one create handed out.
    const t = (x: Sandbox) => (x as unknown as { envdAccessToken: string }).envdAccessToken;
    expect(t(again)).toBe(t(sbx));
    await sbx.kill();
  });

  test("pause_fs_only_refused: pause({keepMemory:false}) is a 400", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    const err = await Sandbox.pause(sbx.sandboxId, { ...sdkOpts(s), keepMemory: false }).catch((e) => e);
    expect(String(err.message)).toContain("not supported");
    await sbx.kill();
  });

  test("connect_running_200: connect to a running sandbox does not shorten its lease", async () => {
    const sbx = await Sandbox.create("base", { ...sdkOpts(s), timeoutMs: 900_000 });
    const before = (await sbx.getInfo()).endAt.getTime();
    await Sandbox.connect(sbx.sandboxId, { ...sdkOpts(s), timeoutMs: 60_000 });
    expect((await sbx.getInfo()).endAt.getTime()).toBe(before);
    await sbx.kill();
  });

  test("expired sandbox: once the node reaped it, getInfo throws SandboxNotFoundError and kill is false", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    s.cluster.nodes[0]!.expire(sbx.sandboxId.replace("sb-", "sb_"));
    s.cluster.nodes[0]!.reapNow();
    const err = await sbx.getInfo().catch((e) => e);
    // Named in the failure text, so a rare flake says what came back instead.
    expect(`${err?.constructor?.name}: ${err?.message}`).toStartWith("SandboxNotFoundError");
    expect(await sbx.kill()).toBe(false);
  });
});

describe("list", () => {
  test("list_filters_and_paging: metadata filter, state filter, limit + nextToken", async () => {
    const a = await Sandbox.create("base", { ...sdkOpts(s), metadata: { suite: "list", n: "1" } });
    const b = await Sandbox.create("base", { ...sdkOpts(s), metadata: { suite: "list", n: "2" } });
    await until(async () => (await Sandbox.list({ ...sdkOpts(s), query: { metadata: { suite: "list" } } }).nextItems()).length === 2, "two listed sandboxes", 3_000, 25);
    const p = Sandbox.list({ ...sdkOpts(s), query: { metadata: { suite: "list" } }, limit: 1 });
    const first = await p.nextItems();
    expect(first).toHaveLength(1);
    expect(p.hasNext).toBe(true);
    const second = await p.nextItems();
    expect(second).toHaveLength(1);
    expect(p.hasNext).toBe(false);
    expect(new Set([first[0]!.sandboxId, second[0]!.sandboxId])).toEqual(new Set([a.sandboxId, b.sandboxId]));
    const only2 = await Sandbox.list({ ...sdkOpts(s), query: { metadata: { suite: "list", n: "2" } } }).nextItems();
    expect(only2.map((x) => x.sandboxId)).toEqual([b.sandboxId]);
    await a.pause();
    await until(async () => (await Sandbox.list({ ...sdkOpts(s), query: { metadata: { suite: "list" }, state: ["paused"] } }).nextItems()).length === 1, "one paused sandbox listed", 3_000, 25);
    const paused = await Sandbox.list({ ...sdkOpts(s), query: { metadata: { suite: "list" }, state: ["paused"] } }).nextItems();
    expect(paused.map((x) => x.sandboxId)).toEqual([a.sandboxId]);
    await a.kill();
    await b.kill();
  });
});

describe("namespaces", () => {
  test("two keys cannot see or touch each other's sandboxes on any route", async () => {
    const a = await Sandbox.create("base", { ...sdkOpts(s, KEY_A), metadata: { owner: "a" } });
    const B = sdkOpts(s, KEY_B);
    expect(await Sandbox.getInfo(a.sandboxId, B).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
    expect(await Sandbox.kill(a.sandboxId, B)).toBe(false);
    expect(await Sandbox.pause(a.sandboxId, B).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
    expect(await Sandbox.connect(a.sandboxId, B).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
    expect(await Sandbox.setTimeout(a.sandboxId, 1000, B).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
    expect(await Sandbox.getMetrics(a.sandboxId, B).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
    expect(await Sandbox.createSnapshot(a.sandboxId, B).catch((e) => e)).toBeInstanceOf(SandboxNotFoundError);
    await until(async () => (await Sandbox.list({ ...sdkOpts(s, KEY_A), query: { metadata: { owner: "a" } } }).nextItems()).length === 1, "one sandbox listed for owner a", 3_000, 25);
    expect(await Sandbox.list({ ...B, query: { metadata: { owner: "a" } } }).nextItems()).toEqual([]);
    expect((await a.getInfo()).state).toBe("running");
    await a.kill();
  });
});

describe("snapshots, fork, metrics", () => {
  test("snapshot_stamped_ns + snapshots_ns_isolation + delete_snapshot_twice", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    const snap = await sbx.createSnapshot({ name: "v1" });
    expect(snap.names).toEqual(["v1"]);
    const ck = s.cluster.nodes[0]!.node.checkpoints.get(snap.snapshotId)!;
    expect(ck.name).toBe("team-a/v1");
    const mine = await Sandbox.listSnapshots(sdkOpts(s)).nextItems();
    expect(mine.map((x) => x.snapshotId)).toContain(snap.snapshotId);
    const theirs = await Sandbox.listSnapshots(sdkOpts(s, KEY_B)).nextItems();
    expect(theirs.map((x) => x.snapshotId)).not.toContain(snap.snapshotId);
    expect(await Sandbox.deleteSnapshot(snap.snapshotId, sdkOpts(s, KEY_B))).toBe(false);
    expect(await Sandbox.deleteSnapshot(snap.snapshotId, sdkOpts(s))).toBe(true);
    expect(await Sandbox.deleteSnapshot(snap.snapshotId, sdkOpts(s))).toBe(false);
    await sbx.kill();
  });

  test("create from a snapshot id claims the checkpoint", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    const snap = await sbx.createSnapshot({ name: "from" });
    const child = await Sandbox.create(snap.snapshotId, sdkOpts(s));
    expect(claimOf(child.sandboxId)!.fromCheckpoint).toBe(snap.snapshotId);
    await child.kill();
    await sbx.kill();
  });

  test("fork_children_tokens: fork({count:2}) gives two initialised children with their own tokens", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    const parent = claimOf(sbx.sandboxId)!;
    const children = await (sbx as unknown as { fork(o: { count: number }): Promise<Sandbox[]> }).fork({ count: 2 });
    expect(children).toHaveLength(2);
    for (const child of children) {
      const c = claimOf(child.sandboxId)!;
      expect(c.id).not.toBe(parent.id);
      expect((child as unknown as { envdAccessToken: string }).envdAccessToken).toBe(envdAccessToken(SECRET, c.id, c.token));
      expect((await child.getInfo()).state).toBe("running");
      await child.kill();
    }
    await sbx.kill();
  });

  test("metrics_paused_empty: metrics of a running sandbox come from envd; paused => [] without a wake", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    const m = await sbx.getMetrics();
    expect(m).toHaveLength(1);
    expect(m[0]!.cpuCount).toBe(2);
    expect(m[0]!.memTotal).toBe(1073741824);
    await sbx.pause();
    expect(await sbx.getMetrics()).toEqual([]);
    expect((await sbx.getInfo()).state).toBe("paused");
    await sbx.kill();
  });

  test("network_update_refused: updateNetwork answers 400 naming the egress field, not SandboxNotFoundError", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    const err = await Sandbox.updateNetwork(sbx.sandboxId, { allowOut: [] } as never, sdkOpts(s)).catch((e) => e);
    expect(err).not.toBeInstanceOf(SandboxNotFoundError);
    expect(String(err.message)).toStartWith("400: allowOut (an egress allow list) is not supported: egress rules");
    await sbx.kill();
  });
});

describe("templates", () => {
  test("alias_exists_true_false: Template.exists for an alias, a pool image and an unknown name", async () => {
    expect(await Template.exists("base", sdkOpts(s))).toBe(true);
    expect(await Template.exists("img:1", sdkOpts(s))).toBe(true);
    expect(await Template.exists("nope", sdkOpts(s))).toBe(false);
  });

  test("tags_roundtrip: assignTags / getTags / removeTags on a built template, invisible to another namespace", async () => {
    const sbx = await Sandbox.create("base", sdkOpts(s));
    await new SandboxdClient({ baseUrl: s.cluster.nodes[0]!.url, token: ROOT }).promote(sbx.sandboxId.replace("sb-", "sb_"), { template: "e2b/team-a/tagged" });
    await until(async () => (await Template.exists("tagged", sdkOpts(s))) === true, "template tagged to exist", 3_000, 25);
    const assigned = await Template.assignTags("tagged", ["v1", "stable"], sdkOpts(s));
    expect(assigned.tags).toEqual(["v1", "stable"]);
    expect(assigned.buildId).toMatch(/^[0-9a-f-]{36}$/);
    const tags = await Template.getTags("tagged", sdkOpts(s));
    expect(tags.map((t) => t.tag)).toEqual(["stable", "v1"]);
    expect(tags.every((t) => t.buildId === assigned.buildId)).toBe(true);
    // Tag a tag: "tagged:v1" names the build v1 points at.
    expect((await Template.assignTags("tagged:v1", "prod", sdkOpts(s))).buildId).toBe(assigned.buildId);
    await Template.removeTags("tagged", ["v1", "prod"], sdkOpts(s));
    expect((await Template.getTags("tagged", sdkOpts(s))).map((t) => t.tag)).toEqual(["stable"]);
    expect(await Template.getTags("tagged", sdkOpts(s, KEY_B)).catch((e) => e)).toBeInstanceOf(Error);
    expect(await Template.assignTags("tagged:nope", "x", sdkOpts(s)).catch((e) => String(e.message))).toContain('tag "nope"');
    await sbx.kill();
  });
});

void ROOT;
