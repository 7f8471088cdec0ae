// A bare Pod deleted while vk-sandbox was down (never seen by the restarted daemon): its claims row must be
// released with the stored credential once the pod informer has synced and shows the Pod absent, and never
// while the apiserver cannot be read. The daemon runs as its own process on a real kube-apiserver with the
// sandboxd simulator. docs: services/vk-sandbox/docs/scenarios.md ("Pods deleted while the daemon was down").
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sandboxPod } from "./cluster.ts";
import { freePorts } from "../../kube/ports.ts";
import { waitFor } from "../../support/wait.ts";
import { readClaimsTable, runningPod, simClaimsFor, simRequests, useE2eStack } from "./stack.ts";

const env = useE2eStack();

const table = readClaimsTable;

const running = (ns: string, name: string) => runningPod(env.e2e.kube, ns, name);

/** Release requests the simulator received for claim `id` (whatever their answer). */
const releasesOf = (id: string) => env.stack.sim.requests.filter((r) => r.route === "release" && r.path.includes(id));

/** Start a daemon, run a Pod (bare unless `owner`) on it, stop the daemon (SIGTERM: nothing is released on shutdown). */
async function claimThenStop(node: string, name: string, statePath: string, owner?: { name: string; uid: string }) {
  const first = env.stack.daemon({ node, statePath });
  await first.waitForLog(/vk-sandbox ready/);
  await env.e2e.kube.createPod(sandboxPod(name, node, { owner }));
  const pod = await running("ns", name);
  const id = pod.metadata!.annotations!["sandbox.cocoonstack.io/claim-id"]!;
  await first.kill("SIGTERM");
  const row = table(statePath).claims[`ns/${name}`]!;
  expect(row.id).toBe(id);
  expect(simClaimsFor(env.stack.sim, `ns/${name}`).map((c) => c.id)).toEqual([id]);
  return { id, token: row.token };
}

async function deleteWhileDown(name: string): Promise<void> {
  await env.e2e.kube.deletePod("ns", name, 0);
  await waitFor(`ns/${name} gone from the apiserver`, async () => (await env.e2e.kube.pod("ns", name)) === undefined);
}

describe("vk-sandbox: Pods deleted while the daemon was down", () => {
  test("a bare Pod force-deleted while the daemon was down: the restarted daemon releases its VM with the stored token and drops the row", async () => {
    const statePath = join(env.stack.dir, "offline-bare", "claims.json");
    const { id } = await claimThenStop("vk-offline", "gone", statePath);
    await deleteWhileDown("gone");

    const second = env.stack.daemon({ node: "vk-offline", statePath });
    await second.waitForLog(/vk-sandbox ready/);
    await waitFor("the simulator released the VM", async () => simClaimsFor(env.stack.sim, "ns/gone").length === 0, 20_000);
    // Released with the claim's own stored token (the simulator knows it as that sandbox's credential).
    expect(releasesOf(id).map((r) => [r.auth, r.outcome])).toEqual([["sandbox", 204]]);
    await waitFor("the row left the claims table", async () => !table(statePath).claims["ns/gone"] && !(table(statePath).releasing ?? []).some((r) => r.id === id));
    await second.kill("SIGTERM");
  }, 90_000);

  test("an owned Pod force-deleted while the daemon was down: kept while its owner lives, released by the owner re-check once the owner is gone", async () => {
    const statePath = join(env.stack.dir, "offline-owned", "claims.json");
    const owner = await env.e2e.kube.createSandbox("ns", "owned");
    const { id } = await claimThenStop("vk-offline-owned", "owned", statePath, { name: "owned", uid: owner.metadata.uid });
    await deleteWhileDown("owned");

    const second = env.stack.daemon({ node: "vk-offline-owned", statePath });
    await second.waitForLog(/vk-sandbox ready/);
    // Preserved for the live owner (on disk, so a later restart keeps judging it); the first owner read is 10 s on.
    await waitFor("the row preserved for its owner", async () => table(statePath).claims["ns/owned"]?.owner?.uid === owner.metadata.uid);
    await Bun.sleep(12_000);
    expect(releasesOf(id)).toEqual([]);
    expect(simClaimsFor(env.stack.sim, "ns/owned").map((c) => c.id)).toEqual([id]);

    await env.e2e.kube.deleteSandbox("ns", "owned");
    await waitFor("the simulator released the VM", async () => simClaimsFor(env.stack.sim, "ns/owned").length === 0, 45_000, 250);
    expect(releasesOf(id).map((r) => [r.auth, r.outcome])).toEqual([["sandbox", 204]]);
    await waitFor("the row left the claims table", async () => !table(statePath).claims["ns/owned"] && !(table(statePath).releasing ?? []).some((r) => r.id === id));
    await second.kill("SIGTERM");
  }, 120_000);

  test("the Pod still exists after the restart: nothing is released, the Pod keeps its claim", async () => {
    const statePath = join(env.stack.dir, "offline-kept", "claims.json");
    const { id } = await claimThenStop("vk-offline-kept", "kept", statePath);
    const releasesBefore = simRequests(env.stack.sim, "release");

    const second = env.stack.daemon({ node: "vk-offline-kept", statePath });
    await second.waitForLog(/vk-sandbox ready/);
    const pod = await running("ns", "kept");
    // A verification pass and an owner re-check tick run within 15 s; give them the time to act wrongly.
    await Bun.sleep(16_000);
    expect(pod.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(id);
    expect(simClaimsFor(env.stack.sim, "ns/kept").map((c) => c.id)).toEqual([id]);
    expect(simRequests(env.stack.sim, "release")).toBe(releasesBefore);
    expect(table(statePath).claims["ns/kept"]?.id).toBe(id);
    await second.kill("SIGTERM");
  }, 90_000);

  test("the apiserver cannot be read at restart: nothing is released until it can, then the deleted Pod's VM is", async () => {
    const statePath = join(env.stack.dir, "offline-blind", "claims.json");
    const { id } = await claimThenStop("vk-offline-blind", "blind", statePath);
    await deleteWhileDown("blind");

    // Same credentials, but the server is a closed port: every list and watch fails.
    const blindConfig = join(env.stack.dir, "offline-blind", "kubeconfig");
    const closed = freePorts(1)[0]!;
    writeFileSync(blindConfig, readFileSync(env.e2e.kubeconfig, "utf8").replace(/server: \S+/, `server: https://127.0.0.1:${closed}`), { mode: 0o600 });
    const blind = env.stack.daemon({ node: "vk-offline-blind", statePath, env: { KUBECONFIG: blindConfig } });
    // Sandboxd is reachable, so startup verification runs and the 15 s loops tick; only the Pod cache is missing.
    await blind.waitForLog(/claims table loaded/);
    await Bun.sleep(16_000);
    expect(blind.proc.exitCode).toBeNull();
    expect(releasesOf(id)).toEqual([]);
    expect(simClaimsFor(env.stack.sim, "ns/blind").map((c) => c.id)).toEqual([id]);
    expect(table(statePath).claims["ns/blind"]?.id).toBe(id);
    await blind.kill("SIGTERM");

    // With the apiserver readable the same table is released: the wait above was the apiserver, not the case.
    const seeing = env.stack.daemon({ node: "vk-offline-blind", statePath });
    await seeing.waitForLog(/vk-sandbox ready/);
    await waitFor("the simulator released the VM", async () => simClaimsFor(env.stack.sim, "ns/blind").length === 0, 20_000);
    expect(releasesOf(id).map((r) => r.outcome)).toEqual([204]);
    await seeing.kill("SIGTERM");
  }, 120_000);
});
