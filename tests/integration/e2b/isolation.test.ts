// Tenant isolation on the e2b surface once the FLEET VIEW lists the sandbox (scenarios.test.ts checks the same
// routes right after create, when only the live probe path can find it). Three namespaces: `team`, `team-b` (whose
// name has `team` as a prefix) and `default` (the namespace a claim_ref without `<ns>/` falls into). sandbox-e2b
// runs in-process on one simulated sandboxd node (development substrate).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ROOT, startStack, type Stack } from "./harness.ts";
import { until } from "#tests/support/wait.ts";
import { claimIdOf, sameSandboxId } from "#shared/e2b/ids.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";

const KEY_T = "e2b_tttttttttttttttttttttttttttttttttttttttt";
const KEY_TB = "e2b_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const KEY_D = "e2b_dddddddddddddddddddddddddddddddddddddddd";

interface Reply {
  status: number;
  json: any;
}
let s: Stack;
beforeAll(async () => {
  s = await startStack({ keys: `${KEY_T} team\n${KEY_TB} team-b\n${KEY_D} default\n`, pools: ["img:1/none/small=8"] });
});
afterAll(() => s.stop());

async function api(method: string, path: string, key: string, body?: unknown): Promise<Reply> {
  const r = await fetch(`${s.apiUrl}${path}`, {
    method,
    headers: { "content-type": "application/json", "x-api-key": key },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await r.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = text;
  }
  return { status: r.status, json };
}
const node = () => s.cluster.nodes[0]!;
/** Node calls that would change a sandbox: none may come from another tenant's request. */
const MUTATING = new Set(["release", "renew", "hibernate", "wake", "fork", "checkpoint", "ports", "checkpoint-claim", "checkpoint-delete"]);
const mutatingCalls = () => node().requests.filter((e) => e.route !== null && MUTATING.has(e.route)).length;

/** Waits until the mesh's fleet view lists `id` (the poll runs every 200 ms), so lookups go through its entries. */
async function listedByFleet(id: string): Promise<void> {
  await until(() => s.mesh.fleet.nodes().some((n) => n.entries.some((e) => sameSandboxId(id, e.id))), `the fleet view to list ${id}`, 15_000, 20);
}

/** Every sandbox route, the destructive one last. */
function routes(id: string): Array<[string, string, unknown?]> {
  return [
    ["GET", `/sandboxes/${id}`],
    ["POST", `/sandboxes/${id}/timeout`, { timeout: 30 }],
    ["POST", `/sandboxes/${id}/refreshes`, { duration: 30 }],
    ["POST", `/sandboxes/${id}/pause`],
    // A strict pause probes the guest through the node's ports relay: never for another tenant's sandbox.
    ["POST", `/sandboxes/${id}/pause`, { requireHealthyGuest: true }],
    // The network update: 404 whatever the body asks (an empty body would be a 204 for its owner).
    ["PUT", `/sandboxes/${id}/network`, {}],
    ["PUT", `/sandboxes/${id}/network`, { allow_internet_access: true }],
    ["PUT", `/sandboxes/${id}/network`, { allowOut: ["1.1.1.1"] }],
    ["POST", `/sandboxes/${id}/resume`, {}],
    ["POST", `/sandboxes/${id}/connect`, { timeout: 30 }],
    ["POST", `/v2/sandboxes/${id}/connect`, { timeout: 30 }],
    ["GET", `/sandboxes/${id}/metrics`],
    ["GET", `/sandboxes/${id}/logs`],
    ["GET", `/v2/sandboxes/${id}/logs`],
    ["POST", `/sandboxes/${id}/fork`, {}],
    ["POST", `/sandboxes/${id}/snapshots`, {}],
    ["DELETE", `/sandboxes/${id}`],
  ];
}

async function expectInvisible(id: string, key: string): Promise<void> {
  const before = mutatingCalls();
  for (const [m, p, body] of routes(id)) {
    const r = await api(m, p, key, body);
    expect([m, p, r.status]).toEqual([m, p, 404]);
  }
  const listed = await api("GET", "/v2/sandboxes", key);
  expect(listed.json.map((x: { sandboxID: string }) => x.sandboxID)).not.toContain(id);
  const many = await api("GET", `/sandboxes/metrics?sandbox_ids=${id}`, key);
  expect(many.status).toBe(200);
  expect(Object.keys(many.json.sandboxes)).not.toContain(id);
  expect(mutatingCalls()).toBe(before);
}

describe("a key of another namespace, after the fleet lists the sandbox", () => {
  test("gets 404 on every sandbox route and no node call changes the sandbox; its owner still sees it running", async () => {
    const sbx = (await api("POST", "/v2/sandboxes", KEY_T, { templateID: "img:1" })).json;
    expect(sbx.sandboxID).toBeDefined();
    await listedByFleet(sbx.sandboxID);
    await expectInvisible(sbx.sandboxID, KEY_TB);
    await expectInvisible(sbx.sandboxID, KEY_D);
    expect((await api("GET", `/sandboxes/${sbx.sandboxID}`, KEY_T)).json.state).toBe("running");
    // The owner's batch metrics name it: the other keys' empty answers above are not just an empty endpoint.
    expect(Object.keys((await api("GET", `/sandboxes/metrics?sandbox_ids=${sbx.sandboxID}`, KEY_T)).json.sandboxes)).toEqual([sbx.sandboxID]);
    const own = await api("GET", "/v2/sandboxes", KEY_T);
    expect(own.json.map((x: { sandboxID: string }) => x.sandboxID)).toContain(sbx.sandboxID);
  });

  test("fork children carry their namespace: other namespaces (default too) get 404, the owner lists them", async () => {
    const parent = (await api("POST", "/v2/sandboxes", KEY_T, { templateID: "img:1" })).json;
    const forked = await api("POST", `/sandboxes/${parent.sandboxID}/fork`, KEY_T, { count: 2 });
    expect(forked.status).toBe(201);
    const children: string[] = forked.json.map((c: { sandbox: { sandboxID: string } }) => c.sandbox.sandboxID);
    expect(children).toHaveLength(2);
    for (const id of children) await listedByFleet(id);
    for (const id of children) {
      expect(s.mesh.fleet.nodes().flatMap((n) => n.entries).find((e) => sameSandboxId(id, e.id))?.namespace).toBe("team");
      await expectInvisible(id, KEY_D);
      await expectInvisible(id, KEY_TB);
    }
    const own = await api("GET", "/v2/sandboxes", KEY_T);
    for (const id of children) expect(own.json.map((x: { sandboxID: string }) => x.sandboxID)).toContain(id);
    for (const id of children) expect((await api("GET", `/sandboxes/${id}`, KEY_T)).status).toBe(200);
  });
});

describe("snapshots of a namespace whose name has another namespace's name as a prefix (team vs team-b)", () => {
  test("team-b's snapshot is not listed for team, cannot be created from or deleted by team, and still works for team-b", async () => {
    const sbx = (await api("POST", "/v2/sandboxes", KEY_TB, { templateID: "img:1" })).json;
    const snap = await api("POST", `/sandboxes/${sbx.sandboxID}/snapshots`, KEY_TB, { name: "nightly" });
    expect(snap.status).toBe(201);
    const snapshotID: string = snap.json.snapshotID;

    const listTB = await api("GET", "/snapshots", KEY_TB);
    expect(listTB.json).toContainEqual({ snapshotID, names: ["nightly"] });
    for (const key of [KEY_T, KEY_D]) {
      const list = await api("GET", "/snapshots", key);
      expect(list.status).toBe(200);
      expect(list.json.map((x: { snapshotID: string }) => x.snapshotID)).not.toContain(snapshotID);
      expect((await api("GET", `/snapshots?sandboxID=${sbx.sandboxID}`, key)).json).toEqual([]);
    }

    const claimsBefore = node().requests.filter((e) => e.route === "checkpoint-claim" || e.route === "claim").length;
    for (const key of [KEY_T, KEY_D]) {
      // Create from another namespace's snapshot id is refused before any node is asked to claim it.
      const r = await api("POST", "/v2/sandboxes", key, { templateID: snapshotID });
      expect(r.status).toBe(404);
      expect(JSON.stringify(r.json)).not.toContain("nightly");
      const del = await api("DELETE", `/templates/${snapshotID}`, key);
      expect(del.status).toBe(404);
    }
    expect(node().requests.filter((e) => e.route === "checkpoint-claim" || e.route === "claim").length).toBe(claimsBefore);
    expect(node().requests.filter((e) => e.route === "checkpoint-delete")).toHaveLength(0);

    // The owner's snapshot is intact and usable.
    expect((await api("GET", "/snapshots", KEY_TB)).json).toContainEqual({ snapshotID, names: ["nightly"] });
    const fromSnap = await api("POST", "/v2/sandboxes", KEY_TB, { templateID: snapshotID });
    expect(fromSnap.status).toBe(201);
  });

  test("team's snapshot stays invisible to team-b as well", async () => {
    const sbx = (await api("POST", "/v2/sandboxes", KEY_T, { templateID: "img:1" })).json;
    const snap = await api("POST", `/sandboxes/${sbx.sandboxID}/snapshots`, KEY_T, { name: "mine" });
    expect(snap.status).toBe(201);
    const list = await api("GET", "/snapshots", KEY_TB);
    expect(list.json.map((x: { snapshotID: string }) => x.snapshotID)).not.toContain(snap.json.snapshotID);
    expect((await api("POST", "/v2/sandboxes", KEY_TB, { templateID: snap.json.snapshotID })).status).toBe(404);
  });
});

describe("the other direction: a key of `team` and a sandbox of `team-b` (issue 31)", () => {
  // A `<ns>/` prefix compared without its slash puts `team-b/…` in `team`: only this direction sees that slip.
  test("right after create (live probe) and once the fleet lists it: 404 on every route for team, unlisted, no node call changes it; team-b still has it", async () => {
    const sbx = (await api("POST", "/v2/sandboxes", KEY_TB, { templateID: "img:1" })).json;
    expect(sbx.sandboxID).toBeDefined();
    await expectInvisible(sbx.sandboxID, KEY_T);
    await listedByFleet(sbx.sandboxID);
    await expectInvisible(sbx.sandboxID, KEY_T);
    expect((await api("GET", `/sandboxes/${sbx.sandboxID}`, KEY_TB)).json.state).toBe("running");
    const own = await api("GET", "/v2/sandboxes", KEY_TB);
    expect(own.json.map((x: { sandboxID: string }) => x.sandboxID)).toContain(sbx.sandboxID);
  });
});

describe("built templates of one name in two namespaces (issue 31)", () => {
  /** Promote a fresh sandbox of `key`'s namespace `ns` as its built template `name`, and wait until the view has it. */
  async function built(key: string, ns: string, name: string): Promise<void> {
    const sbx = (await api("POST", "/v2/sandboxes", key, { templateID: "img:1" })).json;
    await new SandboxdClient({ baseUrl: node().url, token: ROOT }).promote(claimIdOf(sbx.sandboxID), { template: `e2b/${ns}/${name}` });
    await until(() => s.mesh.fleet.nodes().some((n) => n.templates.some((t) => t.template === `e2b/${ns}/${name}`)), `e2b/${ns}/${name} in the view`, 15_000, 20);
    expect((await api("DELETE", `/sandboxes/${sbx.sandboxID}`, key)).status).toBe(204);
  }
  const onNode = (ref: string) => (node().info().templates ?? []).some((t) => t.key.template === ref);
  const listed = async (key: string) => ((await api("GET", "/templates", key)).json as Array<{ templateID: string }>).map((t) => t.templateID);

  test("DELETE /templates/<name> with one namespace's key deletes its own only: the other's stays on its node, listed and usable as a create target", async () => {
    for (const name of ["app", "web"]) {
      await built(KEY_T, "team", name);
      await built(KEY_TB, "team-b", name);
    }
    for (const key of [KEY_T, KEY_TB]) expect(await listed(key)).toEqual(expect.arrayContaining(["app", "web"]));
    // team deletes its `app`, team-b its `web`: both directions of the `team` / `team-b` prefix pair.
    for (const [key, ns, other, name] of [[KEY_T, "team", "team-b", "app"], [KEY_TB, "team-b", "team", "web"]] as const) {
      const deletesBefore = node().requests.filter((e) => e.route === "template-delete").length;
      expect((await api("DELETE", `/templates/${name}`, key)).status).toBe(204);
      // The node was asked to delete the caller's template and nothing else.
      const deletes = node().requests.filter((e) => e.route === "template-delete").slice(deletesBefore);
      expect(deletes.length).toBeGreaterThan(0);
      expect(deletes.map((e) => e.query.template)).toEqual(deletes.map(() => [`e2b/${ns}/${name}`]));
      expect([onNode(`e2b/${ns}/${name}`), onNode(`e2b/${other}/${name}`)]).toEqual([false, true]);
      const otherKey = key === KEY_T ? KEY_TB : KEY_T;
      expect(await listed(key)).not.toContain(name);
      expect(await listed(otherKey)).toContain(name);
      expect((await api("POST", "/v2/sandboxes", key, { templateID: name })).status).toBe(404);
      expect((await api("POST", "/v2/sandboxes", otherKey, { templateID: name })).status).toBe(201);
    }
  }, 60_000);
});

describe("a strict pause (requireHealthyGuest) of a guest that does not answer", () => {
  test("is a 503 and the sandbox keeps running; a burst of them shares one health probe through the node", async () => {
    // Each strict pause probes envd /health through the node's ports relay for up to 5 s: twelve at once at a
    // wedged guest held twelve node connections (one per request, any number of them), one now.
    const sbx = (await api("POST", "/v2/sandboxes", KEY_T, { templateID: "img:1" })).json;
    await node().wedgeGuest(claimIdOf(sbx.sandboxID));
    const probes = () => node().requests.filter((e) => e.route === "ports").length;
    const before = probes();
    const replies = await Promise.all(Array.from({ length: 12 }, () => api("POST", `/sandboxes/${sbx.sandboxID}/pause`, KEY_T, { requireHealthyGuest: true })));
    expect(replies.map((r) => r.status)).toEqual(Array(12).fill(503));
    expect(replies[0]!.json.message).toContain("did not answer a health check");
    expect(probes() - before).toBe(1);
    expect((await api("GET", `/sandboxes/${sbx.sandboxID}`, KEY_T)).json.state).toBe("running");
    // The guest back, a strict pause pauses.
    await node().wedgeGuest(claimIdOf(sbx.sandboxID), false);
    expect((await api("POST", `/sandboxes/${sbx.sandboxID}/pause`, KEY_T, { requireHealthyGuest: true })).status).toBe(204);
  }, 60_000);
});
