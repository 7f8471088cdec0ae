// Read your own writes (issue 20 part 2), with the stock JS SDK 2.51 against simulated nodes, through a fleet view
// frozen before any write: whatever the lists show below comes from the replica's own overlay, not a lucky poll.
// The replica that created, paused, resumed or killed a sandbox answers its next list, get and kill with that
// change at once; a second kill of a killed id is 404 (the SDK's kill() answers false) at once, without a node call.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox, SandboxNotFoundError } from "e2b";
import { createE2bApp } from "#shared/e2b/app.ts";
import { E2bSurface } from "#shared/e2b/surface.ts";
import type { FleetNode, FleetSource } from "#shared/fleet/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { until } from "#tests/support/wait.ts";
import { DOMAIN, KEY_A, ROOT, SECRET, startStack, type Stack } from "./harness.ts";

const log = createLogger({ level: "error", name: "test" });
let s: Stack;
/** The fleet as sandbox-e2b saw it before the tests wrote anything. */
let frozen: readonly FleetNode[];
const servers: ReturnType<typeof Bun.serve>[] = [];

/** One more replica of the surface over `view`, served on its own port. */
function replica(view: () => readonly FleetNode[]): { url: string; surface: E2bSurface } {
  const fleet: FleetSource = { nodes: view, ready: () => Promise.resolve(), stop: () => Promise.resolve() };
  const surface = new E2bSurface(
    { namespace: "team-a", domain: DOMAIN, envdVersion: "0.8.0", defaultTimeoutSeconds: 300, aliases: new Map([["base", { image: "img:1", size: "small" as const }]]), envdSecret: SECRET, rootToken: ROOT },
    { fleet, log },
  );
  const app = createE2bApp({ surface, keys: new Map([[KEY_A, "team-a"]]), defaultNamespace: "team-a", log });
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, development: false, fetch: (r) => app.fetch(r) });
  servers.push(server);
  return { url: `http://127.0.0.1:${server.port}`, surface };
}

const opts = (url: string) => ({ apiKey: KEY_A, apiUrl: url, domain: DOMAIN, requestTimeoutMs: 10_000 });
const listIds = async (url: string, query?: Parameters<typeof Sandbox.list>[0]) => {
  const ids: string[] = [];
  const p = Sandbox.list({ ...opts(url), ...query });
  while (p.hasNext) for (const it of await p.nextItems()) ids.push(it.sandboxId);
  return ids;
};
const claimCount = () => s.cluster.nodes.flatMap((n) => n.claims()).length;

beforeAll(async () => {
  s = await startStack();
  frozen = s.mesh.fleet.nodes();
});
afterAll(async () => {
  for (const srv of servers) srv.stop(true);
  await s.stop();
});

describe("read your own writes on the replica that wrote", () => {
  test("create: the next list (every filter the SDK sends) and get show it at once; the frozen view does not", async () => {
    const a = replica(() => frozen);
    const startedBefore = new Date(Date.now() - 2_000);
    const sbx = await Sandbox.create("base", { ...opts(a.url), metadata: { run: "rw-1" } });
    // The snapshot never saw it: only the overlay can list it.
    expect(frozen.flatMap((n) => n.entries).some((e) => e.id === sbx.sandboxId.replace(/^sb-/, "sb_"))).toBe(false);
    expect(await listIds(a.url)).toContain(sbx.sandboxId);
    expect(await listIds(a.url, { query: { state: ["running"], metadata: { run: "rw-1" }, template: "base", startedAfter: startedBefore } })).toEqual([sbx.sandboxId]);
    expect(await listIds(a.url, { query: { state: ["paused"] } })).not.toContain(sbx.sandboxId);
    const info = await Sandbox.getInfo(sbx.sandboxId, opts(a.url));
    expect(info.state).toBe("running");
    expect(info.metadata).toEqual({ run: "rw-1" });
    await Sandbox.kill(sbx.sandboxId, opts(a.url));
  });

  test("pause and resume: the next list says paused, then running; get says so from the node", async () => {
    const a = replica(() => frozen);
    const sbx = await Sandbox.create("base", opts(a.url));
    expect(await Sandbox.pause(sbx.sandboxId, opts(a.url))).toBe(true);
    expect(await listIds(a.url, { query: { state: ["paused"] } })).toContain(sbx.sandboxId);
    expect(await listIds(a.url, { query: { state: ["running"] } })).not.toContain(sbx.sandboxId);
    expect((await Sandbox.getInfo(sbx.sandboxId, opts(a.url))).state).toBe("paused");
    await Sandbox.connect(sbx.sandboxId, opts(a.url));
    expect(await listIds(a.url, { query: { state: ["running"] } })).toContain(sbx.sandboxId);
    expect((await Sandbox.getInfo(sbx.sandboxId, opts(a.url))).state).toBe("running");
    await Sandbox.kill(sbx.sandboxId, opts(a.url));
  });

  test("kill: gone from the next list, get is SandboxNotFoundError, a second kill answers false without a node call", async () => {
    // A view that lists the sandbox the whole time (the snapshot still lags the kill).
    const made = await Sandbox.create("base", opts(s.apiUrl));
    const claimId = made.sandboxId.replace(/^sb-/, "sb_");
    await until(() => s.mesh.fleet.nodes().some((n) => n.entries.some((e) => e.id === claimId)), "the mesh view to list the sandbox", 10_000, 25);
    const lagging = s.mesh.fleet.nodes();
    expect(lagging.some((n) => n.entries.some((e) => e.id === claimId))).toBe(true);
    const a = replica(() => lagging);
    expect(await listIds(a.url)).toContain(made.sandboxId);
    const before = claimCount();
    expect(await Sandbox.kill(made.sandboxId, opts(a.url))).toBe(true);
    expect(claimCount()).toBe(before - 1);
    expect(await listIds(a.url)).not.toContain(made.sandboxId);
    expect(await Sandbox.getInfo(made.sandboxId, opts(a.url)).catch((e: unknown) => e)).toBeInstanceOf(SandboxNotFoundError);
    const releases = s.cluster.nodes.flatMap((n) => n.requests).filter((r) => r.path.endsWith(`/${claimId}/release`)).length;
    expect(await Sandbox.kill(made.sandboxId, opts(a.url))).toBe(false);
    expect(s.cluster.nodes.flatMap((n) => n.requests).filter((r) => r.path.endsWith(`/${claimId}/release`)).length).toBe(releases);
    // Another replica knows only what its snapshot says: it lists the sandbox until the snapshot drops it (one
    // publish), as the issue allows.
    const b = replica(() => lagging);
    expect(await listIds(b.url)).toContain(made.sandboxId);
  });
});
