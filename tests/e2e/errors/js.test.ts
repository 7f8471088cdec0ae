// Errors as the stock JS SDK (e2b 2.51) sees them (issue 20 item 7, docs/e2b.md "Errors as the SDKs see them"):
// every 429 is its RateLimitError with our message (and carries Retry-After, which the SDK needs to retry a REST call),
// an unknown or killed id is its not-found answer on every call, and a paused sandbox on the data plane answers as
// e2b cloud's proxy does. Against sandbox-e2b with its in-process envd proxy and the simulator's envd guest agents.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RateLimitError, Sandbox, SandboxNotFoundError, TimeoutError } from "e2b";
import { DOMAIN, KEY_A, KEY_B, sdkOpts, startStack, type Stack } from "#tests/integration/e2b/harness.ts";
import { ErrorRows } from "./matrix-rows.ts";

// A key whose namespace may hold one sandbox: the next create is the namespace quota's 429.
const KEY_Q = "e2b_qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq";
const UNKNOWN = "sbunknown0000000000000000";

let s: Stack;
beforeAll(async () => {
  s = await startStack({
    proxy: true,
    guestAgents: true,
    pools: ["img:1/none/small=6"],
    keys: `${KEY_A} team-a\n${KEY_B} team-b\n${KEY_Q} team-q max-sandboxes=1\n`,
    // One relay at a time per sandbox: a second concurrent request is the relay cap's 429.
    extraFlags: ["--envd-proxy-max-relays-per-sandbox=1"],
  });
}, 60_000);
afterAll(async () => {
  await s?.stop();
  rows.write();
});

const V = "e2b (JS) 2.51";
const rows = new ErrorRows(
  "errors-js-mesh",
  "Errors: e2b (JS) 2.51 on sandbox-e2b",
  "What the stock JS SDK raises for each error answer (issue 20 item 7; docs/e2b.md \"Errors as the SDKs see them\"), each " +
    "judged against what it raises against e2b cloud. Suite: tests/e2e/errors/js.test.ts (sandbox-e2b with its in-process " +
    "envd proxy, one relay per sandbox, a key whose namespace holds at most one sandbox).",
  "sandbox-e2b mesh (tests/integration/e2b/harness.ts, simulator guest agents)",
  9,
);

const opts = (apiKey = KEY_A) => sdkOpts(s, apiKey);
const errorOf = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e);

describe("429 is the SDK's RateLimitError, with Retry-After and our message", () => {
  test("namespace quota on create: RateLimitError naming the quota; the raw answer carries Retry-After", async () => {
    const first = await Sandbox.create("base", { ...opts(KEY_Q), retries: 0 });
    try {
      const err = await errorOf(Sandbox.create("base", { ...opts(KEY_Q), retries: 0 }));
      expect(err).toBeInstanceOf(RateLimitError);
      expect((err as Error).message).toContain("Rate limit exceeded");
      expect((err as Error).message).toContain("max-sandboxes");
      const raw = await fetch(`${s.apiUrl}/sandboxes`, { method: "POST", headers: { "x-api-key": KEY_Q, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base" }) });
      expect(raw.status).toBe(429);
      expect(Number(raw.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(((await raw.json()) as { code: number }).code).toBe(429);
    } finally {
      await first.kill();
    }
    rows.ok("quota", V, "Sandbox.create past max-sandboxes -> RateLimitError (429, Retry-After)", "");
  });

  test("a node's 429 on setTimeout: passed through with Retry-After, so the SDK retries it by itself and succeeds", async () => {
    const sbx = await Sandbox.create("base", opts());
    const node = s.cluster.nodes[0]!;
    node.fail("renew", 429, { error: "node claim quota reached" }, 1, sbx.sandboxId.replace("sb-", "sb_"));
    // Without Retry-After the SDK does not retry a 429: this threw RateLimitError before.
    await sbx.setTimeout(120_000);
    node.fail("renew", 429, { error: "node claim quota reached" }, Infinity);
    const err = await errorOf(Sandbox.setTimeout(sbx.sandboxId, 120_000, { ...opts(), retries: 0 }));
    node.clearFaults();
    expect(err).toBeInstanceOf(RateLimitError);
    expect((err as Error).message).toContain("the node is at capacity; retry later");
    await sbx.kill();
    rows.ok("node429", V, "setTimeout on a node 429 -> retried after Retry-After; RateLimitError past retries", "");
  });

  test("the relay's per-sandbox cap on files.read: RateLimitError with our message; Retry-After on the wire", async () => {
    const sbx = await Sandbox.create("base", opts());
    await sbx.files.write("/home/user/a.txt", "a");
    // A command that runs holds the sandbox's one relay slot while it streams.
    const held = await sbx.commands.run("sleep 3", { background: true });
    try {
      const err = await errorOf(sbx.files.read("/home/user/a.txt"));
      expect(err).toBeInstanceOf(RateLimitError);
      expect((err as Error).message).toContain("too many concurrent requests to this sandbox (limit 1)");
      const raw = await fetch(`${s.proxyUrl}/files?path=/home/user/a.txt`, { headers: { host: `49983-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": (sbx as unknown as { envdAccessToken: string }).envdAccessToken } });
      expect(raw.status).toBe(429);
      expect(raw.headers.get("retry-after")).toBe("1");
    } finally {
      await held.kill().catch(() => undefined);
    }
    await sbx.kill();
    rows.ok("relaycap", V, "files.read past the relay's per-sandbox cap -> RateLimitError (429, Retry-After)", "");
  });

  test("the node's own 429 on the ports relay: RateLimitError, not an unreachable sandbox", async () => {
    const sbx = await Sandbox.create("base", opts());
    const node = s.cluster.nodes[0]!;
    node.fail("ports", 429, { error: "too many relays" }, 1);
    const err = await errorOf(sbx.files.read("/home/user/none.txt"));
    node.clearFaults();
    expect(err).toBeInstanceOf(RateLimitError);
    expect((err as Error).message).toContain("the sandbox's node is busy; retry later");
    await sbx.kill();
    rows.ok("noderelay", V, "files.read on a node's ports-relay 429 -> RateLimitError", "");
  });
});

describe("unknown and killed ids are the SDK's not-found answer", () => {
  test("an id nobody holds: getInfo, setTimeout, connect, pause raise SandboxNotFoundError; kill returns false", async () => {
    for (const [call, p] of [
      ["getInfo", Sandbox.getInfo(UNKNOWN, opts())],
      ["setTimeout", Sandbox.setTimeout(UNKNOWN, 60_000, opts())],
      ["connect", Sandbox.connect(UNKNOWN, opts())],
      ["pause", Sandbox.pause(UNKNOWN, opts())],
    ] as const) {
      const err = await errorOf(p);
      expect(err, call).toBeInstanceOf(SandboxNotFoundError);
    }
    expect(await Sandbox.kill(UNKNOWN, opts())).toBe(false);
    rows.ok("unknown", V, "getInfo / setTimeout / connect / pause of an unknown id -> SandboxNotFoundError; kill -> false", "");
  });

  test("another tenant's id reads exactly like an unknown one", async () => {
    const sbx = await Sandbox.create("base", opts(KEY_A));
    expect(await errorOf(Sandbox.getInfo(sbx.sandboxId, opts(KEY_B)))).toBeInstanceOf(SandboxNotFoundError);
    expect(await Sandbox.kill(sbx.sandboxId, opts(KEY_B))).toBe(false);
    expect((await sbx.getInfo()).state).toBe("running");
    await sbx.kill();
    rows.ok("tenant", V, "getInfo / kill of another namespace's id -> SandboxNotFoundError / false", "");
  });

  test("a killed sandbox: REST calls not found; on the data plane commands.run is SandboxNotFoundError, files.read the SDK's 502 TimeoutError, isRunning false", async () => {
    const sbx = await Sandbox.create("base", opts());
    await sbx.files.write("/home/user/b.txt", "b");
    await sbx.kill();
    expect(await errorOf(sbx.getInfo())).toBeInstanceOf(SandboxNotFoundError);
    expect(await errorOf(sbx.setTimeout(60_000))).toBeInstanceOf(SandboxNotFoundError);
    expect(await errorOf(Sandbox.connect(sbx.sandboxId, opts()))).toBeInstanceOf(SandboxNotFoundError);
    expect(await errorOf(sbx.pause())).toBeInstanceOf(SandboxNotFoundError);
    expect(await sbx.kill()).toBe(false);
    const run = await errorOf(sbx.commands.run("echo gone"));
    expect(run).toBeInstanceOf(SandboxNotFoundError);
    // e2b cloud's proxy answers a gone sandbox 502; the SDK's envd REST map turns every 502 into TimeoutError.
    const read = await errorOf(sbx.files.read("/home/user/b.txt"));
    expect(read).toBeInstanceOf(TimeoutError);
    expect((read as Error).message).toContain("sandbox was not found");
    expect(await sbx.isRunning()).toBe(false);
    const raw = await fetch(`${s.proxyUrl}/health`, { headers: { host: `49983-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": "a".repeat(64) } });
    expect(raw.status).toBe(502);
    const body = await raw.text();
    expect(JSON.parse(body)).toEqual({ code: 502, message: "sandbox was not found" });
    expect(body).not.toContain(sbx.sandboxId);
    rows.ok("killed", V, "killed sandbox: REST -> SandboxNotFoundError; commands.run -> SandboxNotFoundError; files.read -> TimeoutError (502); isRunning -> false", "");
  });
});

describe("a paused sandbox on the data plane", () => {
  test("traffic with the sandbox's token resumes it (autoResume), as e2b cloud does for an auto-resume sandbox", async () => {
    const sbx = await Sandbox.create("base", { ...opts(), lifecycle: { onTimeout: "pause", autoResume: true } });
    expect(await sbx.pause()).toBe(true);
    expect((await sbx.getInfo()).state).toBe("paused");
    const r = await sbx.commands.run("echo resumed");
    expect(r.stdout).toBe("resumed\n");
    expect((await sbx.getInfo()).state).toBe("running");
    await sbx.kill();
    rows.ok("paused", V, "commands.run on a paused autoResume sandbox -> resumes it", "");
  });

  test("a signed download URL may not wake it: 409 'sandbox is paused', as e2b cloud's proxy answers; it stays paused", async () => {
    const sbx = await Sandbox.create("base", { ...opts(), secure: true });
    await sbx.files.write("/home/user/c.txt", "c");
    await sbx.pause();
    const url = new URL(await sbx.downloadUrl("/home/user/c.txt"));
    const raw = await fetch(`${s.proxyUrl}${url.pathname}${url.search}`, { headers: { host: `49983-${sbx.sandboxId}.${DOMAIN}` } });
    expect(raw.status).toBe(409);
    expect(await raw.json()).toEqual({ code: 409, message: "sandbox is paused" });
    expect((await sbx.getInfo()).state).toBe("paused");
    await sbx.kill();
    rows.ok("signed", V, "signed downloadUrl of a paused sandbox -> 409 sandbox is paused, stays paused", "");
  });
});
