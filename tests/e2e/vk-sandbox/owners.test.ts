// Pod deletion is never VM authority: an eviction storm that deletes every Pod while their `Sandbox` owners live
// must leave every VM running for the same-name replacements to adopt; only an owner's end releases. The daemon is
// a separate process authenticated by the ServiceAccount token of manifests/rbac.yaml.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { sandboxPod } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import { simClaimsFor, simRequests, useE2eStack } from "./stack.ts";

const NODE = "vk-owners";
const env = useE2eStack({ node: NODE });

const claimIdOf = async (name: string) =>
  waitFor(`${name} Running with a claim`, async () => {
    const p = await env.e2e.kube.pod("ns", name);
    return p?.status?.phase === "Running" && p.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"];
  });

const gone = (name: string) => waitFor(`${name} deleted`, async () => !(await env.e2e.kube.pod("ns", name)), 30_000);

type Row = { id: string; owner?: { name: string; uid: string } };
const rows = (): Record<string, Row> => JSON.parse(readFileSync(env.stack.statePath, "utf8")).claims;

describe("delete authorization end to end", () => {
  test("every Pod deleted while its owner lives: every VM survives and same-name replacements adopt them", async () => {
    const names = ["ev1", "ev2", "ev3", "ev4", "ev5"];
    const owners = await Promise.all(names.map((n) => env.e2e.kube.createSandbox("ns", n)));
    for (const [i, n] of names.entries()) {
      await env.e2e.kube.createPod(sandboxPod(n, NODE, { owner: { name: n, uid: owners[i]!.metadata.uid } }));
    }
    const ids = await Promise.all(names.map(claimIdOf));
    const releases = simRequests(env.stack.sim, "release");

    // What a Node-NotReady eviction does: delete them all at once, with their grace period.
    await Promise.all(names.map((n) => env.e2e.kube.deletePod("ns", n)));
    await Promise.all(names.map(gone));
    for (const [i, n] of names.entries()) {
      expect(simClaimsFor(env.stack.sim, `ns/${n}`).map((c) => c.id)).toEqual([ids[i]!]);
      expect(rows()[`ns/${n}`]?.owner?.uid).toBe(owners[i]!.metadata.uid);
    }
    expect(simRequests(env.stack.sim, "release")).toBe(releases);

    const claims = simRequests(env.stack.sim, "claim");
    for (const [i, n] of names.entries()) {
      await env.e2e.kube.createPod(sandboxPod(n, NODE, { owner: { name: n, uid: owners[i]!.metadata.uid } }));
    }
    expect(await Promise.all(names.map(claimIdOf))).toEqual(ids);
    expect(simRequests(env.stack.sim, "claim")).toBe(claims);
    for (const n of names) expect(rows()[`ns/${n}`]?.owner).toBeUndefined();
  }, 90_000);

  test("an owner deleted after its Pod: the owner re-check releases the preserved sandbox", async () => {
    const owner = await env.e2e.kube.createSandbox("ns", "later");
    await env.e2e.kube.createPod(sandboxPod("later", NODE, { owner: { name: "later", uid: owner.metadata.uid } }));
    const id = await claimIdOf("later");
    await env.e2e.kube.deletePod("ns", "later");
    await gone("later");
    expect(simClaimsFor(env.stack.sim, "ns/later").map((c) => c.id)).toEqual([id]);

    await env.e2e.kube.deleteSandbox("ns", "later");
    // The re-check reads a preserved row's owner 10 s after the preserve, then backs off; allow two ticks.
    await waitFor("sandbox released", async () => simClaimsFor(env.stack.sim, "ns/later").length === 0, 35_000, 250);
    await waitFor("row gone", async () => !rows()["ns/later"], 5_000);
  }, 60_000);

  test("a Pod whose owner is already gone is released at deletion", async () => {
    const owner = await env.e2e.kube.createSandbox("ns", "orphaned");
    await env.e2e.kube.createPod(sandboxPod("orphaned", NODE, { owner: { name: "orphaned", uid: owner.metadata.uid } }));
    const id = await claimIdOf("orphaned");
    await env.e2e.kube.deleteSandbox("ns", "orphaned");
    await env.e2e.kube.deletePod("ns", "orphaned");
    await waitFor("released", async () => simClaimsFor(env.stack.sim, "ns/orphaned").length === 0, 20_000);
    await gone("orphaned");
    const release = env.stack.sim.requests.find((r) => r.route === "release" && r.path === `/v1/sandboxes/${id}/release`);
    expect(release?.outcome).toBe(204);
    expect(rows()["ns/orphaned"]).toBeUndefined();
  }, 60_000);

  test("a bare Pod deleted: its sandbox is released, the row goes and the Pod disappears after its grace period", async () => {
    await env.e2e.kube.createPod(sandboxPod("bare", NODE));
    await claimIdOf("bare");
    await env.e2e.kube.deletePod("ns", "bare");
    await waitFor("released", async () => simClaimsFor(env.stack.sim, "ns/bare").length === 0, 20_000);
    await gone("bare");
    expect(rows()["ns/bare"]).toBeUndefined();
    const reasons = (await env.e2e.kube.events("ns")).filter((e) => e.involvedObject.name === "bare").map((e) => e.reason);
    expect(reasons).toEqual(expect.arrayContaining(["ProviderCreateSuccess", "ProviderDeleteSuccess"]));
  }, 60_000);
});
