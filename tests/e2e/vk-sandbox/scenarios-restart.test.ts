// Spec §11 scenarios whose subject is what a restarted daemon makes of its claims table (31, 32, 36, 37), end to
// end: the daemon as its own process on a real kube-apiserver, killed with SIGKILL, the world changed while it is
// down (a pod replaced under another owner, a sandbox gone from sandboxd, an older table format, a release that
// keeps failing), then started again. One restart serves all four, so the file stays short.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { CLAIM_ID, runningWithClaim, sandboxPod, startE2eCluster, type E2eCluster } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import type { Daemon } from "./daemon.ts";
import { simClaimsFor, startStack, type Stack } from "./stack.ts";

const NODE = "vk-rerun";

let e2e: E2eCluster;
let stack: Stack;
let statePath: string;

type Row = { id: string; token: string; podUID: string; authority?: string; claimedAt?: string; deadline?: string; owner?: { uid: string } };
const table = (): { claims: Record<string, Row>; releasing?: Row[] } => JSON.parse(readFileSync(statePath, "utf8"));
const pod = (name: string) => e2e.kube.pod("ns", name);
const running = (name: string, timeoutMs?: number) => runningWithClaim(e2e.kube, "ns", name, timeoutMs);
const isLive = (id: string) => stack.sim.claims().some((c) => c.id === id);
const reqs = (route: string, pred: (e: (typeof stack.sim.requests)[number]) => boolean = () => true) =>
  stack.sim.requests.filter((e) => e.route === route && pred(e));
const claimsFor = (name: string) => reqs("claim", (e) => (e.body as { claim_ref?: string })?.claim_ref === `ns/${name}`);
const releasesOf = (id: string) => reqs("release", (e) => e.path === `/v1/sandboxes/${id}/release`);

function ownedBy(name: string, owner: string, uid: string): V1Pod {
  return sandboxPod(name, NODE, { owner: { name: owner, uid } });
}

// What the first daemon left, and what the world did while no daemon ran.
const before: Record<string, { id: string; token: string; startTime: string }> = {};
let ownerX = "";
let ownerY = "";
let second: Daemon;

beforeAll(async () => {
  e2e = await startE2eCluster();
  stack = await startStack(e2e);
  statePath = join(mkdtempSync(join(tmpdir(), "vk-e2e-rerun-")), "state", "claims.json");

  const first = stack.daemon({ node: NODE, statePath });
  await first.waitForLog(/vk-sandbox ready/, 60_000);
  ownerX = (await e2e.kube.createSandbox("ns", "x31")).metadata.uid;
  const owner32 = (await e2e.kube.createSandbox("ns", "o32")).metadata.uid;
  await e2e.kube.createPod(ownedBy("r31", "x31", ownerX));
  await e2e.kube.createPod(ownedBy("r32", "o32", owner32));
  await e2e.kube.createPod(sandboxPod("r36", NODE));
  await e2e.kube.createPod(sandboxPod("r37", NODE));
  for (const n of ["r31", "r32", "r36", "r37"]) {
    const p = await running(n);
    const id = p.metadata!.annotations![CLAIM_ID]!;
    before[n] = { id, token: table().claims[`ns/${n}`]!.token, startTime: String(p.status!.startTime) };
  }

  // 32: the pod goes while its owner lives (preserved), then the owner goes; its release keeps failing.
  await e2e.kube.deletePod("ns", "r32");
  await waitFor("r32 deleted", async () => !(await pod("r32")));
  // Only r32's release fails: scenario 31's release must not depend on this fault being cleared first.
  stack.sim.fail("release", 500, { error: "release refused" }, 1_000_000, before.r32!.id);
  await e2e.kube.deleteSandbox("ns", "o32");
  await waitFor("r32's claim queued for release", async () => (table().releasing ?? []).some((r) => r.id === before.r32!.id), 30_000, 250);
  await waitFor("its release tried and refused", async () => releasesOf(before.r32!.id).length >= 1, 15_000, 100);
  await first.kill("SIGKILL");

  // While down (setup, not a test: every test below reads the restarted daemon, in any order under --randomize).
  // 31: the pod is replaced by a same-name pod of another owner (another UID), and no delete reaches the daemon.
  await e2e.kube.deletePod("ns", "r31", 0);
  await waitFor("r31 gone", async () => !(await pod("r31")));
  ownerY = (await e2e.kube.createSandbox("ns", "y31")).metadata.uid;
  await e2e.kube.createPod(ownedBy("r31", "y31", ownerY));
  // 36: sandboxd lost r36's sandbox (gone from its table, out of band).
  stack.sim.vanish(before.r36!.id);
  if (isLive(before.r36!.id)) throw new Error("setup: r36 should be gone from sandboxd");
  // 37: r37's row in an older format, without claimedAt and deadline.
  const t = table();
  const { claimedAt: _c, deadline: _d, ...legacy } = t.claims["ns/r37"]!;
  t.claims["ns/r37"] = legacy as Row;
  writeFileSync(statePath, JSON.stringify(t), { mode: 0o600 });

  second = stack.daemon({ node: NODE, statePath });
  await second.waitForLog(/vk-sandbox ready/, 60_000);
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  await e2e?.stop();
});

describe("what a restarted daemon makes of its table", () => {
  test("scenario 32: a queued release failing with 500 persists across the restart and repeats each tick until 204", async () => {
    const id = before.r32!.id;
    const entry = (table().releasing ?? []).find((r) => r.id === id);
    expect(entry?.token).toBe(before.r32!.token);
    const n0 = releasesOf(id).length;
    try {
      // Each tick's release may be sent up to 3 times by the client's idempotent-retry policy (100 ms apart);
      // ticks are 10 s apart. Wait for attempts spanning two ticks after the restart.
      const since = () => releasesOf(id).slice(n0).map((e) => e.at);
      await waitFor("attempts on two ticks", async () => {
        const t = since();
        return t.length >= 2 && t.at(-1)! - t[0]! >= 8_000;
      }, 30_000, 250);
      expect(since().length).toBeLessThanOrEqual(6); // not a hot loop
      expect(releasesOf(id).every((e) => e.outcome === 500 && e.auth === "sandbox")).toBe(true);
      expect(isLive(id)).toBe(true);
    } finally {
      stack.sim.clearFaults();
    }
    await waitFor("released", async () => !isLive(id), 15_000, 250);
    expect(releasesOf(id).at(-1)!.outcome).toBe(204);
    await waitFor("gone from the file", async () => !(table().releasing ?? []).some((r) => r.id === id), 5_000);
    expect(simClaimsFor(stack.sim, "ns/r32")).toEqual([]);
  }, 60_000);

  test("scenario 31: a row with authority X met by a same-name pod with authority Y and another UID: fresh claim, X released", async () => {
    const old = before.r31!.id;
    const p = await running("r31");
    const fresh = p.metadata!.annotations![CLAIM_ID]!;
    expect(fresh).not.toBe(old);
    expect(claimsFor("r31")).toHaveLength(2);
    const row = table().claims["ns/r31"]!;
    expect(row.id).toBe(fresh);
    expect(row.authority).toBe(ownerY);
    expect(row.podUID).toBe(p.metadata!.uid!);
    // X's claim left through the releasing list.
    await waitFor("X released", async () => !isLive(old), 25_000, 250);
    expect(releasesOf(old).at(-1)!.outcome).toBe(204);
    expect(simClaimsFor(stack.sim, "ns/r31").map((c) => c.id)).toEqual([fresh]);
  }, 60_000);

  test("scenario 36: a row whose sandbox is no longer listed is dropped at restart and the pod claims fresh", async () => {
    const old = before.r36!.id;
    const p = await waitFor("r36 on a fresh claim", async () => {
      const got = await running("r36");
      return got.metadata!.annotations![CLAIM_ID] !== old && got;
    });
    const fresh = p.metadata!.annotations![CLAIM_ID]!;
    expect(table().claims["ns/r36"]?.id).toBe(fresh);
    expect(claimsFor("r36")).toHaveLength(2);
    expect(releasesOf(old)).toEqual([]); // dropped, not released: there was nothing left to release
    expect(second.log()).toContain("claim not listed by sandboxd; dropping the row");
  }, 60_000);

  test("scenario 37: an older row without claimedAt/deadline loads, claimedAt is written back, the deadline comes from the listing, startTime stays fixed", async () => {
    const id = before.r37!.id;
    const row = await waitFor("r37 row filled in", async () => {
      const r = table().claims["ns/r37"];
      return r?.claimedAt && r.deadline ? r : undefined;
    });
    expect(row.id).toBe(id);
    const sandbox = stack.sim.claims().find((c) => c.id === id)!;
    expect(Date.parse(row.deadline!)).toBe(Math.floor(sandbox.deadline! / 1000) * 1000);
    expect(claimsFor("r37")).toHaveLength(1); // adopted, not claimed again
    const p = await waitFor("r37 pushed with the filled-in start time", async () => {
      const got = await running("r37");
      return Date.parse(String(got.status?.startTime)) === Date.parse(row.claimedAt!) && got;
    });
    expect(p.metadata!.annotations![CLAIM_ID]).toBe(id);
    // Fixed from now on: a later change to the pod (a label) leaves it where it is.
    await e2e.kube.req("PATCH", "/api/v1/namespaces/ns/pods/r37", { metadata: { labels: { touched: "yes" } } }, "application/merge-patch+json");
    await Bun.sleep(1_500);
    expect(Date.parse(String((await pod("r37"))?.status?.startTime))).toBe(Date.parse(row.claimedAt!));
    expect(table().claims["ns/r37"]?.claimedAt).toBe(row.claimedAt);
  }, 60_000);
});
