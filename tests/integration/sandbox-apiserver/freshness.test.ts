// Freshness end to end (scenarios 27-29): the server with --inventory-stale-after=6s and inventories republished
// every 2 s by the test, read through the aggregator. The table itself is proven on a FakeClock in
// tests/integration/shared/fleet/inventory.test.ts; these prove every read and claim path honours it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { type ApiserverProcess, type InventoryInput, type Stack, readLines, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "root";
const IMG = "img:1";
let stack: Stack;
let server: ApiserverProcess;
const sims: SandboxdSim[] = [];

beforeAll(async () => {
  stack = await startStack();
  for (let i = 0; i < 3; i++) sims.push(await startSandboxdSim({ rootToken: ROOT, pools: [`${IMG}/none/small=50`] }));
  server = await stack.startServer({ args: [`--sandboxd-token=${ROOT}`, "--enable-warm-pool-driver=false", "--inventory-stale-after=6s"] });
  await stack.register(server.port);
}, 90_000);

afterAll(async () => {
  await server?.stop();
  await Promise.all(sims.map((s) => s.stop()));
  await stack?.stop();
});

const inv = (i: number, publishedAt: string | null): InventoryInput => ({
  node: `n${i + 1}`,
  address: sims[i]!.addr,
  publishedAt,
  pools: [{ template: IMG, warm: 50, target: 50 }],
  entries: [{ name: `default/s${i + 1}`, id: `sb_${i + 1}`, phase: "Running" }],
});

async function names(): Promise<string[]> {
  const r = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/sandboxes");
  return ((await r.json()) as { items: { metadata: { name: string } }[] }).items.map((i) => i.metadata.name);
}

async function status(path: string, init?: RequestInit): Promise<number> {
  const r = await stack.cluster.adminFetch(path, init);
  await r.body?.cancel();
  return r.status;
}

const createBody = (name: string) =>
  JSON.stringify({ apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name }, spec: { podTemplate: { spec: { containers: [{ name: "c", image: IMG }] } } } });

async function createNode(name: string): Promise<string> {
  const r = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes", { method: "POST", body: createBody(name), headers: { "content-type": "application/json" } });
  const body = (await r.json()) as { status?: { nodeName?: string }; message?: string };
  if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${body.message}`);
  return body.status!.nodeName!;
}

/**
 * A gauge from the server's own /metrics (scraped directly with the cluster admin's client certificate, which its
 * SubjectAccessReview allows), or undefined while it is not exported yet.
 */
async function serverGauge(name: string): Promise<number | undefined> {
  const r = await fetch(`https://127.0.0.1:${server.port}/metrics`, { tls: { ca: stack.caPem, cert: stack.cluster.admin.certPem, key: stack.cluster.admin.keyPem } });
  if (r.status !== 200) throw new Error(`GET /metrics: ${r.status} ${await r.text()}`);
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(await r.text());
  return m ? Number(m[1]) : undefined;
}

/**
 * Republishes the given nodes every 2 s until stopped, on a fixed schedule: sleeping 2 s after each apply would
 * stretch the period by the apply's time (seconds on a loaded machine), and with it the time a silent node takes to
 * go stale, which 27 times.
 */
function publisher(nodes: () => number[]) {
  let stopped = false;
  const loop = (async () => {
    for (let next = Date.now(); !stopped; ) {
      const at = rfc3339(Date.now());
      await Promise.all(nodes().map((i) => stack.publish(inv(i, at))));
      next += 2000;
      await Bun.sleep(Math.max(0, next - Date.now()));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

// Waits for a change to show through the aggregator end at once; their deadlines are ceilings for a loaded machine.
describe("freshness through the server (--inventory-stale-after=6s, 2 s publishes)", () => {
  test("27: n3 stops publishing: within about 8 s its sandboxes leave lists, watches see DELETED, Get is 404 and creates skip n3; its next publish restores it", async () => {
    let publishing = [0, 1, 2];
    const stop = publisher(() => publishing);
    try {
      await waitFor("three nodes listed", async () => (await names()).length === 3, 10_000);
      const watch = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes?watch=true");
      const events: string[] = [];
      const reading = readLines(watch, (line) => {
        const e = JSON.parse(line) as { type: string; object: { metadata: { name: string } } };
        events.push(`${e.type} ${e.object.metadata.name}`);
      });
      const stoppedAt = Date.now();
      publishing = [0, 1];
      await waitFor("s3 to leave the list", async () => !(await names()).includes("s3"), 12_000);
      expect(Date.now() - stoppedAt).toBeLessThan(10_000);
      await waitFor("DELETED s3 on the watch", () => events.includes("DELETED s3"), 15_000);
      expect(await status("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/s3")).toBe(404);
      const claimsOnN3 = sims[2]!.requests.filter((r) => r.route === "claim").length;
      for (let i = 0; i < 6; i++) expect(await createNode(`fresh-${i}`)).not.toBe("n3");
      expect(sims[2]!.requests.filter((r) => r.route === "claim").length).toBe(claimsOnN3);
      publishing = [0, 1, 2];
      await waitFor("s3 back", async () => (await names()).includes("s3"), 15_000);
      await reading.stop();
    } finally {
      await stop();
    }
  }, 90_000);

  test("28: when every node stops publishing, after 3x the window the last inventory is still served and creates still route", async () => {
    const at = rfc3339(Date.now());
    await Promise.all([0, 1, 2].map((i) => stack.publish(inv(i, at))));
    await waitFor("three nodes", async () => (await names()).length === 3, 10_000);
    // The server's own clock says when 3x the window has passed: the age of the newest publishedAt it has seen.
    await waitFor("the newest inventory to be older than 3x the window (18 s) by the server's account", async () => ((await serverGauge("sandbox_inventory_newest_publish_age_seconds")) ?? 0) > 18, 30_000, 250);
    expect((await names()).sort()).toEqual(["s1", "s2", "s3"]);
    expect(["n1", "n2", "n3"]).toContain(await createNode("after-outage"));
  }, 40_000);

  test("29: n1 without publishedAt next to a stamped n2 is stale; with neither stamped both are served; n1 stamped an hour ahead leaves n2 in", async () => {
    await stack.unpublish("n3");
    await stack.publish(inv(0, null));
    await stack.publish(inv(1, rfc3339(Date.now())));
    await waitFor("only s2", async () => JSON.stringify(await names()) === JSON.stringify(["s2"]), 15_000);
    await stack.publish(inv(1, null));
    await waitFor("s1 and s2 unstamped", async () => JSON.stringify(await names()) === JSON.stringify(["s1", "s2"]), 15_000);
    await stack.publish(inv(0, rfc3339(Date.now() + 3_600_000)));
    await stack.publish(inv(1, rfc3339(Date.now())));
    await waitFor("both with n1 in the future", async () => JSON.stringify(await names()) === JSON.stringify(["s1", "s2"]), 15_000);
  }, 60_000);
});
