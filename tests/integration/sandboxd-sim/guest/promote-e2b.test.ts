// A promoted template, the way a template build leaves one (issue 19 item 5, issue 18 deliver 5), seen through
// the stock e2b JS SDK (2.51.0) on sandbox-e2b + the simulator's namespaced guests: a sandbox is changed the way a
// build changes it (a file written as root, a new user, envd /init's default user, workdir and env, a start command
// left running in the background), promoted through the sandboxd API as the built template `e2b/<ns>/<name>`, and
// `Sandbox.create(<name>)` then hands out a clone that has all of it: the marker, the env, the workdir, the user,
// and the start command running again (its effect: a file naming the clone, a server on port 3000).
import { waitFor } from "#tests/support/wait.ts";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { Sandbox } from "e2b";
import { exchangeOverTunnel } from "#shared/relay/index.ts";
import { ROOT, sdkOpts, startStack, type Stack } from "../../e2b/harness.ts";

// Without root the simulator's guests are process sandboxes (isolation.ts): no /opt, no users, no own loopback.
const nsTest = process.getuid?.() === 0 ? test : test.skip;
const ENVD = 49983;

let s: Stack;
beforeAll(async () => {
  s = await startStack({ proxy: true, guestAgents: true, pools: ["img:1/none/small=2"] });
});
afterAll(() => s.stop());

const tokenOf = (sbx: Sandbox) => (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
const out = async (sbx: Sandbox, cmd: string, o: { user?: "root" } = {}) => (await sbx.commands.run(cmd, o)).stdout.trim();

/** A request to a sandbox's guest port through the envd proxy (E2B_SANDBOX_URL mode: header routing). */
const viaProxy = (sbx: Sandbox, port: number, path: string, init: RequestInit = {}) =>
  fetch(`${s.proxyUrl}${path}`, { ...init, headers: { "e2b-sandbox-id": sbx.sandboxId, "e2b-sandbox-port": String(port), "x-access-token": tokenOf(sbx), ...(init.headers ?? {}) } });

nsTest("a clone of a promoted template has the build's files, user, workdir, env, and its start command running again", async () => {
  const name = `app-${randomBytes(4).toString("hex")}`;
  const parent = await Sandbox.create("base", sdkOpts(s));
  // The build's RUN steps: a file written as root, a user and its directory.
  await parent.commands.run("echo built > /opt/marker && useradd -m app && mkdir /app && chown app:app /app", { user: "root" });
  // Finalize's /init, as the build sends it (e2b.md §6.2): the final user, workdir and env become envd's defaults.
  // The envd proxy refuses /init from users (shared/relay/route.ts): the build calls it over the node's ports relay.
  const parentId = await out(parent, "hostname");
  const node = s.cluster.nodes[0]!;
  const init = await exchangeOverTunnel({ address: node.addr, claimId: parentId, port: ENVD, token: ROOT }, {
    method: "POST",
    path: "/init",
    headers: { host: "envd", "content-type": "application/json" },
    body: JSON.stringify({ accessToken: tokenOf(parent), defaultUser: "app", defaultWorkdir: "/app", envVars: { A: "1", STAGE: "built" } }),
    timeoutMs: 5_000,
    maxBytes: 4096,
  });
  expect(init.status).toBe(204);
  expect(await out(parent, "id -un; pwd; echo $A")).toBe("app\n/app\n1");
  // The build's startCmd in the background: it leaves a trace naming the machine it runs on, then serves port 3000.
  await parent.commands.run("echo \"started on $(hostname) as $(id -un) in $PWD with A=$A\" > started && exec python3 -m http.server 3000 --bind 127.0.0.1", { background: true, timeoutMs: 0 });
  await waitFor("the parent's start command", async () => (await out(parent, "cat started 2>/dev/null || true")).includes(parentId) || undefined);

  // Promote through the sandboxd API (the build's finalize does the same), as the namespace's built template.
  const pr = await fetch(`${node.url}/v1/sandboxes/${parentId}/promote`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ token: "", template: `e2b/team-a/${name}` }) });
  expect(pr.status).toBe(200);
  // The surface learns built templates from the nodes' inventories (polled): a create right after may 404.
  const clone = await waitFor(`Sandbox.create(${name})`, () => Sandbox.create(name, sdkOpts(s)).catch(() => undefined), 20_000);
  const cloneId = await out(clone, "hostname");
  expect(cloneId).not.toBe(parentId);
  // What the build wrote, its user, workdir and env.
  expect(await out(clone, "cat /opt/marker; id -un; pwd; echo $A $STAGE; getent passwd app | cut -d: -f6")).toBe("built\napp\n/app\n1 built\n/home/app");
  // The start command ran again in the clone, as the user and in the directory it was started with.
  const started = await waitFor("the clone's start command", async () => {
    const t = await out(clone, "cat /app/started 2>/dev/null || true");
    return t.includes(cloneId) ? t : undefined;
  });
  expect(started).toBe(`started on ${cloneId} as app in /app with A=1`);
  const served = await waitFor("the clone's port 3000", async () => {
    const r = await viaProxy(clone, 3000, "/started").catch(() => undefined);
    return r?.status === 200 ? r.text() : undefined;
  }, 15_000);
  expect(served.trim()).toBe(started);
  // It is listed as the clone's own process (the SDK's commands.list), not a host process.
  expect((await clone.commands.list()).map((p) => p.args.join(" ")).join("\n")).toContain("http.server 3000");
  // A copy: the clone's writes stay in the clone, and the parent still has its own.
  await clone.commands.run("echo changed > /opt/marker", { user: "root" });
  expect(await out(parent, "cat /opt/marker")).toBe("built");
  await Promise.all([parent.kill(), clone.kill()]);
});

nsTest("a sandbox promoted with nothing left running gives clones no start command", async () => {
  const name = `quiet-${randomBytes(4).toString("hex")}`;
  const parent = await Sandbox.create("base", sdkOpts(s));
  // A command that has ended is not a start command (only what still runs at promote time is).
  await parent.commands.run("echo once >> /tmp/ran");
  const parentId = await out(parent, "hostname");
  const node = s.cluster.nodes[0]!;
  const pr = await fetch(`${node.url}/v1/sandboxes/${parentId}/promote`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ token: "", template: `e2b/team-a/${name}` }) });
  expect(pr.status).toBe(200);
  const clone = await waitFor(`Sandbox.create(${name})`, () => Sandbox.create(name, sdkOpts(s)).catch(() => undefined), 20_000);
  expect(await out(clone, "cat /tmp/ran")).toBe("once");
  expect(await clone.commands.list()).toEqual([]);
  await Promise.all([parent.kill(), clone.kill()]);
});
