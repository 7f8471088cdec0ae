// The simulator sleeps like sandboxd (sandboxd.md §6 "Idle clock", §5.4; services/sandboxd-sim/docs/sleep.md):
// per pool idle_hibernate_seconds / archive_after_seconds / archive_delete_after_seconds, what resets the idle clock
// (sandbox-token ports relay and exec; never root or tenant reads, never a passive relay), an open relay holding
// it, memory freed while asleep, wake on access, the archive tier and its retention, and the slowWake fault knob.
// Every test runs on the fake clock: time moves only through advance, so nothing here waits on wall time except
// for socket events (a relay's open and close), which are awaited as conditions.
import { afterEach, describe, expect, test } from "bun:test";
import type { SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { poolSpec } from "#services/sandboxd-sim/sim.ts";
import { IDLE_SWEEP_MS } from "#services/sandboxd-sim/idle.ts";
import { KEY, ROOT, call, claim, rawRequest, simsPerTest, startEcho, upgradeHead, until } from "./helpers.ts";

const start = simsPerTest();
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(stops.map((f) => f()));
  stops.length = 0;
});

const SMALL_USED = 536870912 / 4; // the simulator's running small VM: a quarter of its 512 MiB
const headComplete = (s: string) => s.includes("\r\n\r\n") && (s.startsWith("HTTP/1.1 101") || s.includes("}"));

/** A node whose base:24.04 pool sleeps after `idle` s (archive/retention optional), and one claim of it with a guest. */
async function sleepy(o: { idle?: number; archive?: number; retention?: number; ttl?: number } = {}) {
  const s = await start();
  const entry: Record<string, unknown> = { template: "base:24.04", warm: 1, idle_hibernate_seconds: o.idle ?? 60 };
  if (o.archive) entry.archive_after_seconds = o.archive;
  if (o.retention) entry.archive_delete_after_seconds = o.retention;
  const put = await call(s, "PUT", "/v1/pools", { body: { pools: [entry] } });
  expect(put.status).toBe(200);
  const c = (await claim(s, { ttl_seconds: o.ttl ?? 3600 })).json as { id: string; token: string; deadline: string };
  const echo = await startEcho();
  stops.push(echo.stop);
  s.attachGuest(c.id, 8080, echo.port);
  return { s, c };
}

const row = async (s: SandboxdSim, id: string) => (await call(s, "GET", `/v1/sandboxes/${id}`)).json;
const stateOf = (s: SandboxdSim, id: string) => s.claims().find((x) => x.id === id)?.state;
const metric = async (s: SandboxdSim, name: string) => {
  const text = (await call(s, "GET", "/metrics")).text;
  return Number(new RegExp(`^sandboxd_${name} (\\S+)$`, "m").exec(text)?.[1]);
};

/** Opens a sandbox-token (or root) ports relay; resolves once it is spliced (101) or refused. */
async function relay(s: SandboxdSim, id: string, token: string) {
  return rawRequest(s.url, upgradeHead(`/v1/sandboxes/${id}/ports/8080`, token), headComplete);
}
/** A relay that opens and closes again, as the e2b proxy's one-request relays do; waits for the node to see the close. */
async function touch(s: SandboxdSim, id: string, token: string) {
  const conn = await relay(s, id, token);
  expect(conn.data()).toStartWith("HTTP/1.1 101");
  conn.sock.destroy();
  await until(() => (s.claims().find((x) => x.id === id)?.holds ?? 0) === 0, "the relay's close");
}

describe("sandboxd-sim idle clock", () => {
  test("a running sandbox of a pool with idle_hibernate_seconds hibernates once idle that long, and frees its memory", async () => {
    const { s, c } = await sleepy({ idle: 60 });
    expect(s.memory().resident_bytes).toBe(SMALL_USED);
    s.advance(59_000);
    expect(stateOf(s, c.id)).toBe("running");
    s.advance(1_000 + IDLE_SWEEP_MS);
    expect(stateOf(s, c.id)).toBe("hibernated");
    const r = await row(s, c.id);
    expect(r.hibernated).toBe(true);
    expect(r.deadline).toBe(c.deadline); // the lease keeps running while asleep
    // Memory written out and freed: stats, the memory report and info all say so.
    const stats = (await call(s, "GET", `/v1/sandboxes/${c.id}/stats`)).json;
    expect(stats).toMatchObject({ hibernated: true, mem_used_bytes: 0, mem_used_measured: false, mem_total_bytes: 536870912 });
    expect(s.memory()).toEqual({ resident_bytes: 0, sandboxes: [{ id: c.id, state: "hibernated", mem_total_bytes: 536870912, mem_used_bytes: 0 }] });
    expect((await call(s, "GET", "/v1/info")).json.hibernated).toBe(1);
    expect(await metric(s, "hibernates_total")).toBe(1);
    expect(await metric(s, "hibernated")).toBe(1);
  });

  test("a sandbox-token relay resets the idle clock; root and tenant reads and a passive relay do not", async () => {
    const { s, c } = await sleepy({ idle: 60 });
    s.setTenant("acme", "acme-token");
    s.advance(50_000);
    await touch(s, c.id, c.token); // activity at t=50 s
    s.advance(50_000); // t=100 s: 50 s idle
    expect(stateOf(s, c.id)).toBe("running");
    // Reads by root and tenant, and a passive root relay, are not activity.
    await row(s, c.id);
    await call(s, "GET", "/v1/sandboxes");
    await call(s, "GET", "/v1/sandboxes", { token: "acme-token" });
    await call(s, "GET", `/v1/sandboxes/${c.id}/stats`);
    await touch(s, c.id, ROOT);
    s.advance(10_000 + IDLE_SWEEP_MS); // t=111 s: 61 s after the last sandbox-token access
    expect(stateOf(s, c.id)).toBe("hibernated");
  });

  test("an open relay holds the clock for as long as it is open; the idle time counts from its close", async () => {
    const { s, c } = await sleepy({ idle: 60 });
    const conn = await relay(s, c.id, c.token);
    expect(conn.data()).toStartWith("HTTP/1.1 101");
    expect(s.claims()[0]!.holds).toBe(1);
    s.advance(30 * 60_000); // half an hour with the relay open
    expect(stateOf(s, c.id)).toBe("running");
    conn.sock.write("still here|");
    await until(() => conn.data().endsWith("still here|"), "the echo through the held relay");
    conn.sock.destroy();
    await until(() => (s.claims()[0]!.holds ?? 0) === 0, "the relay's close");
    s.advance(59_000);
    expect(stateOf(s, c.id)).toBe("running");
    s.advance(1_000 + IDLE_SWEEP_MS);
    expect(stateOf(s, c.id)).toBe("hibernated");
  });

  test("a sandbox-token relay wakes a hibernated sandbox transparently (deadline kept); a passive relay gets 409", async () => {
    const { s, c } = await sleepy({ idle: 60 });
    s.advance(61_000);
    expect(stateOf(s, c.id)).toBe("hibernated");
    const passive = await relay(s, c.id, ROOT);
    expect(passive.data()).toContain('{"error":"sandbox is paused"}');
    expect(stateOf(s, c.id)).toBe("hibernated");
    const conn = await relay(s, c.id, c.token);
    expect(conn.data()).toStartWith("HTTP/1.1 101");
    conn.sock.write("ping|");
    await until(() => conn.data().endsWith("ping|"), "the echo after the wake");
    expect(stateOf(s, c.id)).toBe("running");
    expect((await row(s, c.id)).deadline).toBe(c.deadline);
    expect(s.memory().resident_bytes).toBe(SMALL_USED);
    expect(await metric(s, "wakes_total")).toBe(1);
    conn.sock.destroy();
  });

  test("archive_after_seconds archives a sleeping sandbox; archive_delete_after_seconds deletes the archive; access before that restores it with a fresh lease", async () => {
    const { s, c } = await sleepy({ idle: 60, archive: 120, retention: 300, ttl: 3600 });
    s.advance(60_000 + IDLE_SWEEP_MS);
    expect(stateOf(s, c.id)).toBe("hibernated");
    s.advance(60_000);
    expect(stateOf(s, c.id)).toBe("archived");
    const r = await row(s, c.id);
    expect(r.archived).toBe(true);
    // Archived 120 s after the claim's last activity (its grant); the lease ended and the deadline is now the end of
    // the archive's 300 s retention.
    expect(Date.parse(r.deadline)).toBe(Date.parse(r.claimed_at) + 120_000 + 300_000);
    expect(await metric(s, "archives_total")).toBe(1);

    // Access before the retention ends: restored, with a fresh lease of the claim's granted length.
    await touch(s, c.id, c.token);
    expect(stateOf(s, c.id)).toBe("running");
    expect(Date.parse((await row(s, c.id)).deadline)).toBe(s.clock.now() + 3600_000);
    expect(await metric(s, "unarchives_total")).toBe(1);

    // Asleep and archived again, then kept only for the retention: the next reap tick after it deletes the claim.
    s.advance(120_000 + IDLE_SWEEP_MS);
    expect(stateOf(s, c.id)).toBe("archived");
    s.advance(300_000 + 5_000);
    expect(stateOf(s, c.id)).toBeUndefined();
    expect((await call(s, "GET", `/v1/sandboxes/${c.id}`)).status).toBe(404);
    expect(await metric(s, "archive_deletes_total")).toBe(1);
    expect(await metric(s, "reaps_total")).toBe(0);
  });

  test("without archive_delete_after_seconds an archive is kept; the lease of a sleeping sandbox still ends at its deadline", async () => {
    const kept = await sleepy({ idle: 60, archive: 90 });
    kept.s.advance(100_000);
    expect(stateOf(kept.s, kept.c.id)).toBe("archived");
    expect((await row(kept.s, kept.c.id)).deadline).toBeUndefined();
    kept.s.advance(2 * 3600_000); // past the one-hour lease: an archive holds no lease
    expect(stateOf(kept.s, kept.c.id)).toBe("archived");

    const short = await sleepy({ idle: 60, ttl: 120 });
    short.s.advance(61_000);
    expect(stateOf(short.s, short.c.id)).toBe("hibernated");
    short.s.advance(65_000); // past the 120 s lease and a reap tick: destroyed (on_expire destroy, no archiving pool)
    expect(stateOf(short.s, short.c.id)).toBeUndefined();
  });

  test("pools without an idle time never sleep; a PUT that adds one applies to live claims", async () => {
    const s = await start({ pools: ["base:24.04/none/small=1"] });
    const c = (await claim(s, { ttl_seconds: 3600 })).json;
    s.advance(10 * 60_000);
    expect(stateOf(s, c.id)).toBe("running");
    await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 1, idle_hibernate_seconds: 30 }] } });
    s.advance(IDLE_SWEEP_MS);
    expect(stateOf(s, c.id)).toBe("hibernated"); // idle for ten minutes already
    const cold = (await claim(s, { template: "unpooled:1", ttl_seconds: 3600 })).json;
    s.advance(10 * 60_000);
    expect(stateOf(s, cold.id)).toBe("running");
  });

  test("egress pools take no idle time: PUT /v1/pools 400, and a pool spec names the rule", async () => {
    const s = await start({ pools: [`${KEY}=1`] });
    const r = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", net: "egress", warm: 1, idle_hibernate_seconds: 60 }] } });
    expect(r.status).toBe(400);
    expect(r.json.error).toContain("idle_hibernate_seconds is not allowed on an egress pool");
    const bad = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 1, idle_hibernate_seconds: 60, archive_after_seconds: 60 }] } });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toContain("archive_after_seconds must exceed idle_hibernate_seconds");
    expect(s.info().pools.map((p) => p.key.net)).toEqual(["none"]); // the old set stands
    expect(() => poolSpec("base:24.04/egress/small=1,idle=60")).toThrow(/not allowed on an egress pool/);
    expect(poolSpec("base:24.04/none/small=2,idle=60,archive=600,delete=86400")).toMatchObject({
      template: "base:24.04",
      warm: 2,
      idle_hibernate_seconds: 60,
      archive_after_seconds: 600,
      archive_delete_after_seconds: 86400,
    });
    expect(() => poolSpec("base:24.04=1,sleep=5")).toThrow(/expected idle=N, archive=N or delete=N/);
  });
});

describe("sandboxd-sim slowWake", () => {
  test("20 concurrent first relays to a sleeping sandbox share one wake that takes the knob's time on the node's clock", async () => {
    const { s, c } = await sleepy({ idle: 60 });
    s.advance(61_000);
    s.slowWake(5_000);
    const conns = Array.from({ length: 20 }, () => relay(s, c.id, c.token));
    await until(() => s.node.waking(c.id) && s.requests.filter((r) => r.route === "ports").length === 20, "20 relays parked on the wake");
    // Mid-wake: still hibernated to every reader; a passive relay is refused; one wake counted.
    expect((await row(s, c.id)).hibernated).toBe(true);
    expect((await relay(s, c.id, ROOT)).data()).toContain('{"error":"sandbox is paused"}');
    expect(await metric(s, "wakes_total")).toBe(1);
    s.advance(4_999);
    expect(stateOf(s, c.id)).toBe("hibernated");
    s.advance(1);
    const opened = await Promise.all(conns);
    expect(opened.every((x) => x.data().startsWith("HTTP/1.1 101"))).toBe(true);
    expect(stateOf(s, c.id)).toBe("running");
    expect(await metric(s, "wakes_total")).toBe(1);
    expect(await metric(s, "wake_seconds_total")).toBe(5);
    for (const x of opened) x.sock.destroy();
  });

  test("the wake verb takes the slow wake too, and a release during the wake leaves the waiters a 404", async () => {
    const { s, c } = await sleepy({ idle: 60 });
    s.advance(61_000);
    s.slowWake(2_000);
    const verb = call(s, "POST", `/v1/sandboxes/${c.id}/wake`);
    const conn = relay(s, c.id, c.token);
    await until(() => s.node.waking(c.id) && s.requests.filter((r) => r.route === "ports").length === 1, "both parked");
    expect((await call(s, "POST", `/v1/sandboxes/${c.id}/release`)).status).toBe(204);
    s.advance(2_000);
    expect((await verb).json).toEqual({ error: "unknown sandbox" });
    expect((await conn).data()).toContain('{"error":"unknown sandbox"}');
    s.slowWake(null);
    expect(() => s.slowWake(-1)).toThrow(/expected a duration/);
  });
});

describe("sandboxd-sim exec and the idle clock", () => {
  test("exec wakes a sleeping sandbox, holds the clock while it runs, and counts as activity", async () => {
    const s = await start({ guestAgents: { isolation: "process" }, pools: ["base:24.04/none/small=0,idle=60"] });
    const c = (await claim(s, { ttl_seconds: 3600 })).json;
    const exec = (argv: string[]) => call(s, "POST", `/v1/sandboxes/${c.id}/exec`, { token: c.token, body: { argv } });
    expect((await exec(["/bin/sh", "-c", "echo 1 > state"])).json.exit_code).toBe(0);
    s.advance(61_000);
    expect(stateOf(s, c.id)).toBe("hibernated");
    const r = await exec(["/bin/sh", "-c", "cat state"]);
    expect(r.json).toMatchObject({ exit_code: 0, stdout: "1\n" });
    expect(stateOf(s, c.id)).toBe("running");
    // A long exec holds the clock: while it runs, ten minutes pass without a sleep.
    const long = exec(["/bin/sh", "-c", "sleep 0.3; echo done"]);
    await until(() => (s.claims()[0]!.holds ?? 0) === 1, "the exec running");
    s.advance(10 * 60_000);
    expect(stateOf(s, c.id)).toBe("running");
    expect((await long).json.stdout).toBe("done\n");
    s.advance(59_000);
    expect(stateOf(s, c.id)).toBe("running");
    s.advance(1_000 + IDLE_SWEEP_MS);
    expect(stateOf(s, c.id)).toBe("hibernated");
  });
});

describe("sandboxd-sim agent relay and the idle clock", () => {
  test("GET …/agent (Upgrade: silkd, own token) wakes a sleeping sandbox, splices to the attached agent and holds the clock", async () => {
    const { s, c } = await sleepy({ idle: 60 });
    const agent = await startEcho();
    stops.push(agent.stop);
    const head = (token: string | null, upgrade = "silkd") =>
      `GET /v1/sandboxes/${c.id}/agent HTTP/1.1\r\nHost: sim\r\n${token ? `Authorization: Bearer ${token}\r\n` : ""}Connection: Upgrade\r\nUpgrade: ${upgrade}\r\n\r\n`;
    const open = async (token: string | null, upgrade?: string) => rawRequest(s.url, head(token, upgrade), headComplete);
    expect((await open(null)).data()).toContain('{"error":"missing bearer token"}');
    expect((await open(ROOT)).data()).toContain('{"error":"unknown sandbox"}'); // no operator path
    expect((await open(c.token, "tcp")).data()).toStartWith("HTTP/1.1 426");
    expect((await open(c.token)).data()).toContain('{"error":"guest agent unreachable"}');
    s.attachAgent(c.id, agent.port);

    s.advance(61_000);
    expect(stateOf(s, c.id)).toBe("hibernated");
    const conn = await open(c.token);
    expect(conn.data()).toStartWith("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: silkd\r\n");
    expect(stateOf(s, c.id)).toBe("running");
    s.advance(10 * 60_000);
    expect(stateOf(s, c.id)).toBe("running"); // held while open
    conn.sock.destroy();
    await until(() => (s.claims()[0]!.holds ?? 0) === 0, "the agent relay's close");
    s.advance(60_000 + IDLE_SWEEP_MS);
    expect(stateOf(s, c.id)).toBe("hibernated");
  });
});
