// `bash scripts/stack.sh --mesh` as a new user runs it: the README example prints `hello` against it, the stock
// SDK works through its e2b surface and envd proxy, and Ctrl-C leaves no process, port or temp dir behind.
// A taken port is a clear message and exit 1 before anything starts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import net from "node:net";
import { REPO, startStack, type RunningStack } from "./run-stack.ts";
import { sdkScenarios } from "./sdk-scenarios.ts";
import { Sandbox } from "e2b";
import { run } from "#tests/support/run.ts";

let stack: RunningStack;

beforeAll(async () => {
  stack = await startStack(["--mesh"]);
  console.log(`stack --mesh ready in ${stack.readySeconds.toFixed(1)} s (from bash scripts/stack.sh, bootstrap included)`);
}, 180_000);

afterAll(async () => {
  await stack?.discard("stack-mesh");
});

describe("stack --mesh", () => {
  test("prints the export lines: API key, API URL, sandbox URL", () => {
    expect(Object.keys(stack.env).sort()).toEqual(["E2B_API_KEY", "E2B_API_URL", "E2B_SANDBOX_URL"]);
    expect(stack.env.E2B_API_URL).toBe(`http://127.0.0.1:${stack.ports.e2b}`);
    expect(stack.env.E2B_SANDBOX_URL).toBe(`http://127.0.0.1:${stack.ports.proxy}`);
  });

  test("the README example (bun examples/hello.ts) prints hello", async () => {
    const { stdout: out, stderr: err, code } = await run(["bun", "examples/hello.ts"], { cwd: REPO, env: { ...process.env, ...stack.env } });
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(out.split("\n")).toContain("hello");
    expect(out).toContain("read back: written by examples/hello.ts");
  }, 60_000);

  sdkScenarios(() => ({ apiKey: stack.env.E2B_API_KEY!, apiUrl: stack.env.E2B_API_URL!, sandboxUrl: stack.env.E2B_SANDBOX_URL! }));

  test("Ctrl-C stops it: exit 0, no process, port or temp dir left (a sandbox still running a command included)", async () => {
    expect(stack.workDir).toBeDefined();
    const left = await Sandbox.create("base", { apiKey: stack.env.E2B_API_KEY!, apiUrl: stack.env.E2B_API_URL!, sandboxUrl: stack.env.E2B_SANDBOX_URL! });
    const h = await left.commands.run("sleep 300", { background: true, timeoutMs: 0 });
    expect(h.pid).toBeGreaterThan(0);
    expect(await stack.stop()).toBe(0);
    expect(stack.out.at(-1)).toBe("stack: stopped");
    expect(await stack.leftovers()).toEqual([]);
  }, 30_000);
});

test("a taken port: a message naming the port and its variable, exit 1, nothing started", async () => {
  const holder = net.createServer();
  await new Promise<void>((r) => holder.listen(0, "127.0.0.1", r));
  const port = (holder.address() as net.AddressInfo).port;
  try {
    const { stdout: out, stderr: err, code } = await run(["bun", "scripts/stack.ts", "--mesh"], { cwd: REPO, env: { ...process.env, STACK_E2B_PORT: String(port) } });
    expect(code).toBe(1);
    expect(err).toContain(`port ${port} for the e2b API is already in use`);
    expect(err).toContain(`STACK_E2B_PORT`);
    expect(out).toBe("");
  } finally {
    holder.close();
  }
});

test("a port variable that is not a port, or two parts on one port: a usage error (exit 2) naming the variable, even while another port is taken", async () => {
  // The e2b API's port is held throughout: every value is validated before any port is probed, so the usage error
  // does not depend on what else runs on the machine.
  const holder = net.createServer();
  await new Promise<void>((r) => holder.listen(0, "127.0.0.1", r));
  const taken = String((holder.address() as net.AddressInfo).port);
  try {
    for (const [env, expected] of [
      [{ STACK_PROXY_PORT: "80x" }, 'STACK_PROXY_PORT="80x": expected a port 1-65535'],
      [{ STACK_NODE0_PORT: "17999", STACK_NODE1_PORT: "17999" }, "give STACK_NODE1_PORT another value"],
    ] as const) {
      const p = Bun.spawn(["bun", "scripts/stack.ts", "--mesh"], { cwd: REPO, env: { ...process.env, STACK_E2B_PORT: taken, ...env }, stdout: "pipe", stderr: "pipe" });
      const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
      expect(code).toBe(2);
      expect(err).toContain(expected);
    }
  } finally {
    holder.close();
  }
});
