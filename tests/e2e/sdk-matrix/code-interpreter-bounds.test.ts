// The simulator guest's code interpreter (services/sandboxd-sim/guest/code-interpreter.ts) under input no SDK sends:
// every bad request is a clear 4xx, the counts are bounded, a restart during a cell ends that cell with an error
// (not a hang), and a kernel that dies mid-cell ends it too. Through the real relay of sandbox-e2b (mesh).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "@e2b/code-interpreter";
import { waitFor } from "#tests/support/wait.ts";
import { sdkOpts, startStack, type Stack } from "#tests/integration/e2b/harness.ts";

let s: Stack;
let sb: Sandbox;
beforeAll(async () => {
  s = await startStack({ proxy: true, guestAgents: true, aliases: "base img:1\ncode-interpreter-v1 img:1\n" });
  sb = await Sandbox.create(sdkOpts(s));
}, 60_000);
afterAll(async () => {
  await sb?.kill().catch(() => false);
  await s?.stop();
});

const call = (path: string, init: RequestInit = {}) =>
  fetch(`${s.proxyUrl}${path}`, { ...init, headers: { "e2b-sandbox-id": sb.sandboxId, "e2b-sandbox-port": "49999", "content-type": "application/json", ...(init.headers ?? {}) } });

test("bad requests are 4xx with a reason: not JSON, wrong shape, unknown language, unknown context, over 1 MiB of code", async () => {
  expect((await call("/execute", { method: "POST", body: "{" })).status).toBe(400);
  expect((await call("/execute", { method: "POST", body: JSON.stringify({ code: 1 }) })).status).toBe(400);
  const lang = await call("/execute", { method: "POST", body: JSON.stringify({ code: "1", language: "cobol" }) });
  expect(lang.status).toBe(400);
  expect(((await lang.json()) as { error: string }).error).toContain("cobol");
  expect((await call("/execute", { method: "POST", body: JSON.stringify({ code: "1", context_id: "nope" }) })).status).toBe(404);
  expect((await call("/contexts/nope", { method: "DELETE" })).status).toBe(404);
  expect((await call("/execute", { method: "POST", body: JSON.stringify({ code: "#".repeat(1024 * 1024 + 1) }) })).status).toBe(413);
});

test("at most 16 contexts: the next create is a 429", async () => {
  const made: string[] = [];
  let status = 200;
  while (status === 200 && made.length < 40) {
    const r = await call("/contexts", { method: "POST", body: "{}" });
    status = r.status;
    if (r.status === 200) made.push(((await r.json()) as { id: string }).id);
  }
  expect(status).toBe(429);
  expect(made.length).toBeLessThanOrEqual(16);
  for (const id of made) expect((await call(`/contexts/${id}`, { method: "DELETE" })).status).toBe(204);
});

test("a restart during a running cell ends that cell with an error; a kernel that exits mid-cell ends it too; both start over", async () => {
  const ctx = await sb.createCodeContext();
  const running = sb.runCode("import time\ntime.sleep(30)", { context: ctx, timeoutMs: 20_000 });
  // The context's kernel starts with its first cell, in the sandbox's process table: once it is there the cell runs.
  await waitFor("the context's kernel", async () => ((await sb.commands.list()).some((p) => p.cmd === "python3") ? true : undefined), 10_000);
  await sb.restartCodeContext(ctx);
  const cut = await running;
  expect(cut.error?.name).toBe("KernelRestarted");
  const died = await sb.runCode("import os\nos._exit(3)", { context: ctx });
  expect(died.error?.name).toBe("KernelDied");
  expect((await sb.runCode("21 * 2", { context: ctx })).text).toBe("42");
});

test("a client that stops reading a cell's output: past 16 MiB unread the cell is cut and its kernel restarted; the context still works", async () => {
  const ctx = await sb.createCodeContext();
  const kernels = async () => (await sb.commands.list()).filter((p) => p.cmd === "python3").map((p) => p.pid);
  const before = await kernels();
  const res = await call("/execute", { method: "POST", body: JSON.stringify({ code: "for i in range(100000):\n  print('x' * 1000)", context_id: ctx.id }) });
  expect(res.status).toBe(200);
  // Nothing read: the kernel that ran the cell (the one not there before) appears, then is killed by the cut.
  const started = await waitFor("the cell's kernel", async () => (await kernels()).find((p) => !before.includes(p)), 10_000);
  await waitFor("the cut to restart the kernel", async () => ((await kernels()).includes(started) ? undefined : true), 60_000);
  await res.body?.cancel().catch(() => undefined);
  expect((await sb.runCode("21 * 2", { context: ctx })).text).toBe("42");
}, 90_000);
