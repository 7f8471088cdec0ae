// Spec §11 scenarios about who may end a sandbox and when a claim is durable, run end to end: the daemon as its own
// process (authenticated as the manifests/rbac.yaml ServiceAccount), a real kube-apiserver answering the owner reads
// (real 404s and 403s), the sandboxd simulator in this process for faults and for the truth about which sandboxes
// live. One apiserver and one daemon for the file; its claims table sits in a directory this file can break.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { CLAIM_ID, NODE_GROUP, auditEvents, runningWithClaim, sandboxPod, startE2eCluster, type E2eCluster } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import type { Daemon } from "./daemon.ts";
import { SANDBOXD_TOKEN, simClaimsFor, startStack, type Stack } from "./stack.ts";

const NODE = "vk-authority";
const SB = "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes";

let e2e: E2eCluster;
let stack: Stack;
let daemon: Daemon;
let stateDir: string;
let statePath: string;

beforeAll(async () => {
  e2e = await startE2eCluster();
  // Scenario 27 needs the owner read of an unknown resource to reach the apiserver's router (a 404 that names
  // nothing) rather than stop at authorization: grant the ServiceAccount `get` on a group nobody serves.
  await e2e.cluster.apply([
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "e2e-widgets-reader" },
      rules: [{ apiGroups: ["widgets.example.com"], resources: ["widgets"], verbs: ["get"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "e2e-widgets-reader" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "e2e-widgets-reader" },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: NODE_GROUP }],
    },
  ]);
  stack = await startStack(e2e, { pools: ["base=40"] });
  stateDir = join(mkdtempSync(join(tmpdir(), "vk-e2e-authority-")), "state");
  statePath = join(stateDir, "claims.json");
  daemon = stack.daemon({ node: NODE, statePath });
  await daemon.waitForLog(/vk-sandbox ready/, 60_000);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await e2e?.stop();
});

type Row = { id: string; token: string; authority?: string; owner?: { kind: string; name: string; uid: string } };
const table = (): { claims: Record<string, Row>; releasing?: Row[] } => JSON.parse(readFileSync(statePath, "utf8"));
const row = (name: string) => table().claims[`ns/${name}`];
const pod = (name: string) => e2e.kube.pod("ns", name);
const running = (name: string, timeoutMs?: number) => runningWithClaim(e2e.kube, "ns", name, timeoutMs);
const idOf = async (name: string, timeoutMs?: number) => (await running(name, timeoutMs)).metadata!.annotations![CLAIM_ID]!;
const gone = (name: string, timeoutMs = 30_000) => waitFor(`${name} deleted`, async () => !(await pod(name)), timeoutMs);
const live = (name: string) => simClaimsFor(stack.sim, `ns/${name}`).map((c) => c.id);
const isLive = (id: string) => stack.sim.claims().some((c) => c.id === id);
const reqs = (route: string, pred: (e: (typeof stack.sim.requests)[number]) => boolean = () => true) =>
  stack.sim.requests.filter((e) => e.route === route && pred(e));
const claimsFor = (name: string) => reqs("claim", (e) => (e.body as { claim_ref?: string })?.claim_ref === `ns/${name}`);
const releasesOf = (id: string) => reqs("release", (e) => e.path === `/v1/sandboxes/${id}/release`);
const events = async (name: string) => (await e2e.kube.events("ns")).filter((e) => e.involvedObject.name === name);

async function sandbox(name: string, o: { finalizers?: string[] } = {}): Promise<{ uid: string }> {
  const s = await e2e.kube.ok<{ metadata: { uid: string } }>("POST", SB, {
    apiVersion: "agents.x-k8s.io/v1beta1",
    kind: "Sandbox",
    metadata: { name, namespace: "ns", finalizers: o.finalizers },
    spec: {},
  });
  return { uid: s.metadata.uid };
}

function ownedBy(name: string, owner: { apiVersion: string; kind: string; name: string; uid: string }, annotations?: Record<string, string>): V1Pod {
  const p = sandboxPod(name, NODE, { annotations });
  p.metadata!.ownerReferences = [{ ...owner, controller: true }];
  return p;
}
const sandboxOwner = (name: string, uid: string) => ({ apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", name, uid });

/** As root, directory modes do not stop a write: a plain file where the state directory goes does. */
function breakStateDir(): () => void {
  rmSync(stateDir, { recursive: true, force: true });
  writeFileSync(stateDir, "not a directory");
  return () => rmSync(stateDir, { force: true }); // the daemon recreates the directory on its next write
}

async function releaseDirect(id: string, token: string): Promise<number> {
  const r = await fetch(`${stack.sim.url}/v1/sandboxes/${id}/release`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
  return r.status;
}

describe("durability before visibility", () => {
  test("scenario 21: with the state file unwritable a new sandbox is released, the pod is not Running and no row remains", async () => {
    // Only this test's releases count: the simulator is shared by the file, so earlier tests' releases (in any
    // order under --randomize) must not satisfy or skew these checks. The daemon's own log names each undone id.
    const from = stack.sim.requests.length;
    const releasedSince = () =>
      new Set(stack.sim.requests.slice(from).filter((e) => e.route === "release" && e.outcome === 204).map((e) => e.path.split("/")[3]!));
    const undone = () =>
      daemon
        .log()
        .split("\n")
        .filter((l) => l.includes('"pod":"ns/s21"') && l.includes("claim not persisted; sandbox released"))
        .map((l) => (JSON.parse(l) as { claimId: string }).claimId);
    const restore = breakStateDir();
    let sawRunning = false;
    try {
      await e2e.kube.createPod(sandboxPod("s21", NODE));
      const failed = await waitFor("s21 ProviderFailed", async () => {
        const p = await pod("s21");
        if (p?.status?.phase === "Running") sawRunning = true;
        return p?.status?.reason === "ProviderFailed" && p;
      });
      expect(failed.status?.phase).toBe("Pending");
      expect(failed.status?.message).toMatch(/claims state|not writable|state/i);
      // Every sandbox claimed so far for the pod is given back (a retry may sit between its claim and its undo).
      const attempts = claimsFor("s21").length;
      expect(attempts).toBeGreaterThanOrEqual(1);
      await waitFor("released", async () => undone().length >= attempts && undone().every((id) => releasedSince().has(id)), 10_000, 25);
      expect(sawRunning).toBe(false);
      expect(failed.metadata?.annotations?.[CLAIM_ID]).toBeUndefined();
    } finally {
      restore();
    }
    // Recovery: the next retry claims fresh and commits; only that claim is live and in the file.
    const id = await idOf("s21");
    expect(live("s21")).toEqual([id]);
    const t = table();
    expect(t.claims["ns/s21"]?.id).toBe(id);
    // Each claim but the last was undone: released with 204, in no row, not live.
    const ids = new Set(undone());
    expect(ids.size).toBe(claimsFor("s21").length - 1);
    for (const u of ids) {
      expect(releasedSince().has(u)).toBe(true);
      expect(isLive(u)).toBe(false);
      expect(Object.values(t.claims).map((r) => r.id)).not.toContain(u);
    }
  }, 60_000);

  test("scenario 22: write and undo release both failing: once both recover the stranded sandbox is released before a fresh claim", async () => {
    const releasesBefore = reqs("release").length;
    const restore = breakStateDir();
    stack.sim.fail("release", 500, { error: "release refused" }, 1_000_000);
    let stranded: string;
    try {
      await e2e.kube.createPod(sandboxPod("s22", NODE));
      await waitFor("claimed once", async () => claimsFor("s22").length === 1);
      stranded = live("s22")[0]!;
      // The undo fails, and every retry tries that release again before anything else: no second claim.
      await waitFor("undo retried", async () => releasesOf(stranded).length >= 3, 15_000, 25);
      expect(claimsFor("s22")).toHaveLength(1);
      expect((await pod("s22"))?.status?.phase).not.toBe("Running");
    } finally {
      restore();
      stack.sim.clearFaults();
    }
    const fresh = await idOf("s22");
    expect(fresh).not.toBe(stranded!);
    expect(isLive(stranded!)).toBe(false);
    const released = releasesOf(stranded!).find((e) => e.outcome === 204)!;
    const claims = claimsFor("s22");
    expect(claims).toHaveLength(2);
    expect(released.seq).toBeLessThan(claims[1]!.seq);
    expect(row("s22")?.id).toBe(fresh);
    expect(reqs("release").length).toBeGreaterThan(releasesBefore);
  }, 60_000);
});

describe("delete authorization on a real apiserver", () => {
  test("scenario 26: owner deleting, owner UID rotated, owner Ready reason SandboxExpired: the pod's deletion releases", async () => {
    const deleting = await sandbox("o26a", { finalizers: ["e2e.test/hold"] });
    const rotated = await sandbox("o26b");
    const expired = await sandbox("o26c");
    await e2e.kube.createPod(ownedBy("s26a", sandboxOwner("o26a", deleting.uid)));
    await e2e.kube.createPod(ownedBy("s26b", sandboxOwner("o26b", rotated.uid)));
    await e2e.kube.createPod(ownedBy("s26c", sandboxOwner("o26c", expired.uid)));
    const ids = await Promise.all(["s26a", "s26b", "s26c"].map((n) => idOf(n)));

    await e2e.kube.deleteSandbox("ns", "o26a"); // the finalizer keeps it, with deletionTimestamp set
    await e2e.kube.deleteSandbox("ns", "o26b");
    const again = await sandbox("o26b"); // same name, a new generation
    expect(again.uid).not.toBe(rotated.uid);
    const patched = await e2e.kube.req("PATCH", `${SB}/o26c/status`, { status: { conditions: [{ type: "Ready", status: "False", reason: "SandboxExpired" }] } }, "application/merge-patch+json");
    expect(patched.status).toBe(200);

    for (const n of ["s26a", "s26b", "s26c"]) await e2e.kube.deletePod("ns", n);
    await Promise.all(["s26a", "s26b", "s26c"].map((n) => gone(n)));
    for (const id of ids) expect(isLive(id)).toBe(false);
    for (const n of ["s26a", "s26b", "s26c"]) expect(row(n)).toBeUndefined();
    // Let the finalizer go so the owner can leave.
    await e2e.kube.req("PATCH", `${SB}/o26a`, { metadata: { finalizers: null } }, "application/merge-patch+json");
  }, 60_000);

  test("scenario 27: owner Ready reason SandboxSuspended, a 404 naming nothing, or a 403 on the owner read: the row is preserved", async () => {
    const suspended = await sandbox("o27a");
    const s = await e2e.kube.req("PATCH", `${SB}/o27a/status`, { status: { conditions: [{ type: "Ready", status: "False", reason: "SandboxSuspended" }] } }, "application/merge-patch+json");
    expect(s.status).toBe(200);
    const owners = {
      s27a: sandboxOwner("o27a", suspended.uid),
      // A group the apiserver does not serve: its router answers a bare 404, no Status naming the object.
      s27b: { apiVersion: "widgets.example.com/v1", kind: "Widget", name: "w27", uid: "widget-uid" },
      // The ServiceAccount of manifests/rbac.yaml may not read ReplicaSets: 403.
      s27c: { apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs27", uid: "rs-uid" },
    };
    for (const [n, o] of Object.entries(owners)) await e2e.kube.createPod(ownedBy(n, o));
    const ids = await Promise.all(Object.keys(owners).map((n) => idOf(n)));
    const releases = reqs("release").length;
    for (const n of Object.keys(owners)) await e2e.kube.deletePod("ns", n);
    await Promise.all(Object.keys(owners).map((n) => gone(n)));
    for (const [i, [n, o]] of Object.entries(owners).entries()) {
      expect(isLive(ids[i]!)).toBe(true);
      expect(row(n)?.id).toBe(ids[i]!);
      expect(row(n)?.owner).toMatchObject({ kind: o.kind, name: o.name, uid: o.uid });
    }
    expect(reqs("release").length).toBe(releases);
    // The apiserver really answered 404 and 403 to the daemon's owner reads.
    const audit = auditEvents(e2e.auditPath);
    expect(audit.some((e) => e.verb === "get" && e.requestURI.includes("/widgets.example.com/v1/namespaces/ns/widgets/w27") && e.responseStatus?.code === 404)).toBe(true);
    expect(audit.some((e) => e.verb === "get" && e.requestURI.includes("/apps/v1/namespaces/ns/replicasets/rs27") && e.responseStatus?.code === 403)).toBe(true);
  }, 60_000);

  test("scenario 28: release 500 for a bare pod: ProviderDeleteFailed, the row stays, a retry releases; a 404 counts as released", async () => {
    await e2e.kube.createPod(sandboxPod("s28", NODE));
    const id = await idOf("s28");
    stack.sim.fail("release", 500, { error: "release refused" }, 1_000_000);
    try {
      await e2e.kube.deletePod("ns", "s28");
      await waitFor("ProviderDeleteFailed", async () => (await events("s28")).some((e) => e.type === "Warning" && e.reason === "ProviderDeleteFailed"));
      expect(row("s28")?.id).toBe(id);
      expect(isLive(id)).toBe(true);
      expect(await pod("s28")).toBeDefined(); // the final delete waits for the provider
    } finally {
      stack.sim.clearFaults();
    }
    await gone("s28");
    expect(isLive(id)).toBe(false);
    expect(row("s28")).toBeUndefined();
    expect(releasesOf(id).map((e) => e.outcome)).toContain(204);

    // 404: sandboxd no longer has it (released behind the daemon's back); the delete completes all the same.
    await e2e.kube.createPod(sandboxPod("s28b", NODE));
    const id2 = await idOf("s28b");
    expect(await releaseDirect(id2, row("s28b")!.token)).toBe(204);
    await e2e.kube.deletePod("ns", "s28b");
    await gone("s28b");
    expect(releasesOf(id2).map((e) => e.outcome)).toEqual([204, 404]);
    expect(row("s28b")).toBeUndefined();
    expect((await events("s28b")).filter((e) => e.reason === "ProviderDeleteFailed")).toEqual([]);
  }, 60_000);

  test("scenario 30: a preserved row meets a same-name bare pod, or another controller's pod: the old claim is released via releasing, the new pod claims fresh", async () => {
    const o = await sandbox("o30");
    const oc = await sandbox("o30c");
    const other = await sandbox("o30d");
    await e2e.kube.createPod(ownedBy("s30", sandboxOwner("o30", o.uid)));
    await e2e.kube.createPod(ownedBy("s30c", sandboxOwner("o30c", oc.uid)));
    const [old, oldc] = await Promise.all([idOf("s30"), idOf("s30c")]);
    await e2e.kube.deletePod("ns", "s30");
    await e2e.kube.deletePod("ns", "s30c");
    await Promise.all([gone("s30"), gone("s30c")]);
    expect(row("s30")?.owner?.uid).toBe(o.uid);
    expect(row("s30c")?.owner?.uid).toBe(oc.uid);
    expect(isLive(old) && isLive(oldc)).toBe(true);

    await e2e.kube.createPod(sandboxPod("s30", NODE)); // bare
    await e2e.kube.createPod(ownedBy("s30c", sandboxOwner("o30d", other.uid))); // another controller
    const [fresh, freshc] = await Promise.all([idOf("s30"), idOf("s30c")]);
    expect(fresh).not.toBe(old);
    expect(freshc).not.toBe(oldc);
    expect(claimsFor("s30")).toHaveLength(2);
    expect(claimsFor("s30c")).toHaveLength(2);
    // Released by the drain of the releasing list (10 s ticks), with each old claim's own credential.
    await waitFor("old claims released", async () => !isLive(old) && !isLive(oldc), 25_000, 250);
    expect(live("s30")).toEqual([fresh]);
    expect(live("s30c")).toEqual([freshc]);
    expect(releasesOf(old).map((e) => [e.auth, e.outcome])).toContainEqual(["sandbox", 204]);
    await waitFor("releasing drained from the file", async () => !(table().releasing ?? []).some((r) => r.id === old || r.id === oldc), 5_000);
    expect(row("s30")?.id).toBe(fresh);
  }, 60_000);

  test("scenario 50: force-deleted with grace 0, a bare pod is released and an owned pod with a live owner is preserved", async () => {
    const o = await sandbox("o50");
    await e2e.kube.createPod(sandboxPod("s50", NODE));
    await e2e.kube.createPod(ownedBy("s50o", sandboxOwner("o50", o.uid)));
    const [bareId, ownedId] = await Promise.all([idOf("s50"), idOf("s50o")]);
    expect((await e2e.kube.deletePod("ns", "s50", 0)) as { status: number }).toMatchObject({ status: 200 });
    expect((await e2e.kube.deletePod("ns", "s50o", 0)) as { status: number }).toMatchObject({ status: 200 });
    expect(await pod("s50")).toBeUndefined(); // gone from the apiserver at once: the daemon only sees a delete
    await waitFor("bare released", async () => !isLive(bareId), 20_000);
    await waitFor("bare row gone", async () => !row("s50"), 5_000);
    await waitFor("owned row preserved", async () => row("s50o")?.owner?.uid === o.uid, 20_000);
    expect(isLive(ownedId)).toBe(true);
    expect(releasesOf(ownedId)).toEqual([]);
  }, 60_000);
});

describe("leases and deadlines", () => {
  test("scenario 40: a create on a key whose row is past its deadline while listing fails fails and keeps the row", async () => {
    const o = await sandbox("o40");
    await e2e.kube.createPod(ownedBy("s40", sandboxOwner("o40", o.uid), { "sandbox.cocoonstack.io/ttl-seconds": "3" }));
    const old = await idOf("s40");
    const deadline = stack.sim.claims().find((c) => c.id === old)!.deadline!;
    await e2e.kube.deletePod("ns", "s40");
    await gone("s40");
    expect(row("s40")?.owner?.uid).toBe(o.uid); // preserved for the replacement
    await Bun.sleep(Math.max(0, deadline - Date.now()) + 1_200);
    stack.sim.reapNow(); // sandboxd reaps it
    expect(isLive(old)).toBe(false);

    stack.sim.listFails("500");
    const unavailable = () => daemon.log().split("\n").filter((l) => l.includes("sandboxd unavailable; pod status left unchanged") && l.includes("s40")).length;
    try {
      await e2e.kube.createPod(ownedBy("s40", sandboxOwner("o40", o.uid)));
      await waitFor("create failed on the listing", async () => unavailable() >= 1, 15_000);
      expect(claimsFor("s40")).toHaveLength(1);
      expect(row("s40")?.id).toBe(old);
      expect((await pod("s40"))?.status?.phase).not.toBe("Running");
    } finally {
      stack.sim.listFails(false);
    }
    // With a listing that answers, the row is known reaped: dropped, and the pod claims fresh.
    const fresh = await idOf("s40", 40_000);
    expect(fresh).not.toBe(old);
    expect(row("s40")?.id).toBe(fresh);
  }, 90_000);

  test("scenarios 38 and 39: past its deadline and unlisted, a pod turns Failed/SandboxLeaseExpired; one renewed in sandboxd stays Running", async () => {
    const ttl = { "sandbox.cocoonstack.io/ttl-seconds": "6" };
    await e2e.kube.createPod(sandboxPod("s39", NODE, { annotations: ttl }));
    const renewedId = await idOf("s39");
    const r = await fetch(`${stack.sim.url}/v1/sandboxes/${renewedId}/renew`, {
      method: "POST",
      headers: { authorization: `Bearer ${SANDBOXD_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ ttl_seconds: 3600 }),
    });
    expect(r.status).toBe(200);
    await e2e.kube.createPod(sandboxPod("s38", NODE, { annotations: ttl }));
    const expiredId = await idOf("s38");
    const deadline = stack.sim.claims().find((c) => c.id === expiredId)!.deadline!;
    await Bun.sleep(Math.max(0, deadline - Date.now()) + 1_200);
    stack.sim.reapNow();
    expect(isLive(expiredId)).toBe(false);

    // The lease watch runs every 30 s.
    const failed = await waitFor(
      "s38 Failed",
      async () => {
        const p = await pod("s38");
        return p?.status?.phase === "Failed" && p;
      },
      45_000,
      250,
    );
    const st = failed.status!;
    expect(st.reason).toBe("SandboxLeaseExpired");
    expect(st.message).toContain(new Date(Math.floor(deadline / 1000) * 1000).toISOString().replace(".000Z", "Z"));
    expect(st.podIP).toBeUndefined();
    expect(st.containerStatuses?.map((c) => [c.name, c.ready, c.state?.terminated?.exitCode, c.state?.terminated?.reason])).toEqual([
      ["main", false, 1, "SandboxLeaseExpired"],
    ]);
    // The same tick saw s39 past its cached deadline too, and the listing's later one kept it Running.
    const kept = await pod("s39");
    expect(kept?.status?.phase).toBe("Running");
    expect(kept?.metadata?.annotations?.[CLAIM_ID]).toBe(renewedId);
    expect(isLive(renewedId)).toBe(true);
  }, 120_000);
});
