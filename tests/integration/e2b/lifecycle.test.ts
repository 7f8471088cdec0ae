// Issue 20 part 5 on sandbox-e2b (mesh mode) with the stock JS SDK 2.51 and the simulator's envd-compatible guest
// agents behind the in-process envd proxy: every list filter and order the SDK sends (state, metadata, template,
// startedAfter, order, limit + nextToken paging) is honoured, and `lifecycle: { onTimeout: "pause", autoResume }`
// works: the node pauses the sandbox at its timeout, getInfo says `paused` at once (a get by id asks the owning
// node), and data-plane traffic, or connect, resumes it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox, type SandboxInfo } from "e2b";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";
import { run } from "#tests/support/run.ts";
import { until } from "#tests/support/wait.ts";
import { DOMAIN, KEY_A, sdkOpts, startStack, type Stack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ proxy: true, guestAgents: true });
});
afterAll(() => s.stop());

const claimOf = (id: string) => s.cluster.nodes.flatMap((n) => n.claims()).find((c) => c.id === id.replace(/^sb-/, "sb_"));

async function all(query: Parameters<typeof Sandbox.list>[0]): Promise<SandboxInfo[]> {
  const out: SandboxInfo[] = [];
  const p = Sandbox.list({ ...sdkOpts(s), ...query });
  while (p.hasNext) out.push(...(await p.nextItems()));
  return out;
}

describe("list filters and order (as the SDK sends them)", () => {
  test("state, metadata, template (alias or image), startedAfter; order asc/desc with limit + nextToken paging", async () => {
    const made: Sandbox[] = [];
    for (let i = 0; i < 3; i++) {
      made.push(await Sandbox.create("base", { ...sdkOpts(s), metadata: { suite: "filters", n: String(i) } }));
      // startedAt has second precision: one second apart, the order is by time, not by id.
      if (i < 2) await Bun.sleep(1_050);
    }
    const ids = made.map((m) => m.sandboxId);
    const md = { suite: "filters" };
    expect((await all({ query: { metadata: md }, limit: 2, order: "asc" } as Parameters<typeof Sandbox.list>[0])).map((x) => x.sandboxId)).toEqual(ids);
    expect((await all({ query: { metadata: md }, limit: 1, order: "desc" } as Parameters<typeof Sandbox.list>[0])).map((x) => x.sandboxId)).toEqual([...ids].reverse());
    expect((await all({ query: { metadata: md, template: "base" } })).length).toBe(3);
    expect((await all({ query: { metadata: md, template: "img:1" } })).length).toBe(3);
    expect((await all({ query: { metadata: md, template: "other-image" } })).length).toBe(0);
    const second = (await Sandbox.getInfo(ids[1]!, sdkOpts(s))).startedAt;
    expect((await all({ query: { metadata: md, startedAfter: second }, order: "asc" } as Parameters<typeof Sandbox.list>[0])).map((x) => x.sandboxId)).toEqual(ids.slice(1));
    expect((await all({ query: { metadata: { suite: "filters", n: "2" } } })).map((x) => x.sandboxId)).toEqual(ids.slice(2));
    expect(await Sandbox.pause(ids[0]!, sdkOpts(s))).toBe(true);
    expect((await all({ query: { metadata: md, state: ["paused"] } })).map((x) => x.sandboxId)).toEqual(ids.slice(0, 1));
    expect((await all({ query: { metadata: md, state: ["running"] }, order: "asc" } as Parameters<typeof Sandbox.list>[0])).map((x) => x.sandboxId)).toEqual(ids.slice(1));
    for (const id of ids) await Sandbox.kill(id, sdkOpts(s));
  }, 30_000);
});

// The Python SDK 2.63's own list call (sync client): its SandboxQuery fields, order, limit and next_token paging.
const PY_LIST = [
  "import json, sys",
  "from datetime import datetime",
  "from e2b import Sandbox, SandboxQuery, SandboxState",
  "after = datetime.fromisoformat(sys.argv[1])",
  "md = {'suite': 'py-filters'}",
  "def ids(**kw):",
  "    p = Sandbox.list(**kw)",
  "    out = []",
  "    while p.has_next:",
  "        out += [x.sandbox_id for x in p.next_items()]",
  "    return out",
  "print(json.dumps({",
  "    'asc': ids(query=SandboxQuery(metadata=md), limit=1, order='asc'),",
  "    'desc': ids(query=SandboxQuery(metadata=md), limit=2, order='desc'),",
  "    'template': ids(query=SandboxQuery(metadata=md, template='base')),",
  "    'other': ids(query=SandboxQuery(metadata=md, template='other-image')),",
  "    'after': ids(query=SandboxQuery(metadata=md, started_after=after), order='asc'),",
  "    'paused': ids(query=SandboxQuery(metadata=md, state=[SandboxState.PAUSED])),",
  "    'running': ids(query=SandboxQuery(metadata=md, state=[SandboxState.RUNNING]), order='asc'),",
  "}))",
].join("\n");

describe("list filters and order (as the Python SDK 2.63 sends them)", () => {
  test("SandboxQuery state/metadata/template/started_after, order, limit + next_token", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await Sandbox.create("base", { ...sdkOpts(s), metadata: { suite: "py-filters" } })).sandboxId);
      if (i < 2) await Bun.sleep(1_050);
    }
    await Sandbox.pause(ids[2]!, sdkOpts(s));
    const second = (await Sandbox.getInfo(ids[1]!, sdkOpts(s))).startedAt;
    const dir = mkdtempSync(join(tmpdir(), "e2b-pylist-"));
    try {
      writeFileSync(join(dir, "list.py"), PY_LIST);
      const { python } = await ensurePythonSdk();
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("E2B_")));
      Object.assign(env, { E2B_API_KEY: KEY_A, E2B_API_URL: s.apiUrl, E2B_DOMAIN: DOMAIN, E2B_HTTP_VERSION: "1.1", PYTHONUNBUFFERED: "1" });
      const r = await run([python, join(dir, "list.py"), second.toISOString()], { env, timeoutMs: 60_000 });
      expect(r.stderr).toBe("");
      const got = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
      expect(got).toEqual({ asc: ids, desc: [...ids].reverse(), template: expect.any(Array), other: [], after: ids.slice(1), paused: ids.slice(2), running: ids.slice(0, 2) });
      expect([...got.template].sort()).toEqual([...ids].sort());
    } finally {
      rmSync(dir, { recursive: true, force: true });
      for (const id of ids) await Sandbox.kill(id, sdkOpts(s));
    }
  }, 60_000);
});

describe('lifecycle: { onTimeout: "pause", autoResume: true }', () => {
  test("paused by the node at its timeout: getInfo says paused at once; a command resumes it; connect resumes it", async () => {
    const sbx = await Sandbox.create("base", { ...sdkOpts(s), timeoutMs: 1_000, lifecycle: { onTimeout: "pause", autoResume: true } });
    expect(claimOf(sbx.sandboxId)!.onExpire).toBe("archive");
    const node = s.cluster.nodes.find((n) => n.claims().some((c) => c.id === claimOf(sbx.sandboxId)!.id))!;
    // The node's reaper pauses it after the deadline (forced here rather than waiting for its 5 s tick).
    await until(() => (node.reapNow(), claimOf(sbx.sandboxId)?.state !== "running"), "the node to pause the sandbox at its timeout", 10_000, 50);
    expect((await sbx.getInfo()).state).toBe("paused");
    // autoResume: traffic with the access token wakes it.
    const r = await sbx.commands.run("echo resumed");
    expect(r.stdout).toBe("resumed\n");
    expect(claimOf(sbx.sandboxId)!.state).toBe("running");
    expect((await sbx.getInfo()).state).toBe("running");
    // Paused again at the next timeout; connect resumes it and sets a lease.
    await sbx.setTimeout(1_000);
    await until(() => (node.reapNow(), claimOf(sbx.sandboxId)?.state !== "running"), "the node to pause it again", 10_000, 50);
    expect((await Sandbox.getInfo(sbx.sandboxId, sdkOpts(s))).state).toBe("paused");
    const again = await Sandbox.connect(sbx.sandboxId, { ...sdkOpts(s), timeoutMs: 60_000 });
    expect((await again.getInfo()).state).toBe("running");
    expect((await again.commands.run("echo still here")).stdout).toBe("still here\n");
    await again.kill();
  }, 60_000);
});
