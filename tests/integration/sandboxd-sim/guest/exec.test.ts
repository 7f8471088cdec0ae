// sandboxd's POST /v1/sandboxes/{id}/exec on the simulator, run by the sandbox's guest agent (sandboxd.md §5.6).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";

const ROOT = "exec-root";
let sim: SandboxdSim;
let bare: SandboxdSim;

async function claim(s: SandboxdSim): Promise<{ id: string; token: string }> {
  const r = await fetch(`${s.url}/v1/claim`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ template: "base" }) });
  return (await r.json()) as { id: string; token: string };
}

async function exec(s: SandboxdSim, id: string, token: string | undefined, body: unknown): Promise<{ status: number; json: any; headers: Headers }> {
  const r = await fetch(`${s.url}/v1/sandboxes/${id}/exec`, {
    method: "POST",
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: r.status, json: await r.json(), headers: r.headers };
}

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, guestAgents: true });
  bare = await startSandboxdSim({ rootToken: ROOT });
});
afterAll(async () => {
  await sim.stop();
  await bare.stop();
});

describe("POST /v1/sandboxes/{id}/exec", () => {
  test("the sandbox's own token runs argv in the guest: exit code, stdout, stderr, cwd and env", async () => {
    const c = await claim(sim);
    const r = await exec(sim, c.id, c.token, { argv: ["/bin/sh", "-c", 'mkdir -p w; echo "$GREET"; echo err >&2; exit 3'], env: { GREET: "hi" } });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ exit_code: 3, stdout: "hi\n", stderr: "err\n" });
    const inW = await exec(sim, c.id, c.token, { argv: ["/bin/sh", "-c", 'basename "$PWD"'], cwd: "/home/user/w" });
    expect(inW.json.stdout).toBe("w\n");
  });

  test("auth: missing bearer 401; the root token has no operator path here (404); another sandbox's token 404", async () => {
    const c = await claim(sim);
    const other = await claim(sim);
    expect((await exec(sim, c.id, undefined, { argv: ["true"] })).status).toBe(401);
    expect((await exec(sim, c.id, ROOT, { argv: ["true"] })).json).toEqual({ error: "unknown sandbox" });
    expect((await exec(sim, c.id, other.token, { argv: ["true"] })).status).toBe(404);
  });

  test("the body is strict: unknown field, empty argv and a non-JSON body are 400 naming the problem", async () => {
    const c = await claim(sim);
    expect((await exec(sim, c.id, c.token, { argv: ["true"], shell: true })).json.error).toBe('invalid request body: unknown field "shell"');
    expect((await exec(sim, c.id, c.token, { argv: [] })).json.error).toContain("argv must name a program");
    expect((await exec(sim, c.id, c.token, "{not json")).status).toBe(400);
  });

  test("past timeout_seconds 504, past 8 MiB of output 413; the process is killed either way", async () => {
    const c = await claim(sim);
    const slow = await exec(sim, c.id, c.token, { argv: ["sleep", "30"], timeout_seconds: 1 });
    expect(slow.status).toBe(504);
    const big = await exec(sim, c.id, c.token, { argv: ["/bin/sh", "-c", "head -c 9000000 /dev/zero"] });
    expect(big.status).toBe(413);
    expect(sim.node.guestHost!.get(c.id)!.processes.list()).toEqual([]);
  });

  test("a hibernated sandbox wakes for exec; a failed one is 409; a node without guest agents 503 with Retry-After", async () => {
    const c = await claim(sim);
    sim.hibernate(c.id);
    const r = await exec(sim, c.id, c.token, { argv: ["echo", "awake"] });
    expect(r.json.stdout).toBe("awake\n");
    expect(sim.claims().find((x) => x.id === c.id)!.state).toBe("running");
    sim.failVmm(c.id);
    expect((await exec(sim, c.id, c.token, { argv: ["true"] })).status).toBe(409);
    const b = await claim(bare);
    const none = await exec(bare, b.id, b.token, { argv: ["true"] });
    expect(none.status).toBe(503);
    expect(none.headers.get("retry-after")).toBe("1");
  });
});
