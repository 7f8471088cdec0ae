import { describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ClaimsFileSchema } from "#services/vk-sandbox/claims/schema.ts";
import { ProviderError } from "#services/vk-sandbox/provider/errors.ts";
import { bare, claimMetadataOf, FakeClock, harness, makeSandboxd, pod, readTable, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();
const statePath = () => join(tmp(), "state", "claims.json");
/** Turn the state path unwritable (as root, chmod does not stop us): put a file where its directory goes. */
function breakDir(path: string): () => void {
  const dir = join(path, "..");
  rmSync(dir, { recursive: true, force: true });
  writeFileSync(dir, "not a directory");
  return () => rmSync(dir, { force: true });
}

describe("CreatePod", () => {
  test("a pod with a template and no ttl claims 24 h with claim_ref ns/name and is pushed Running", async () => {
    const path = statePath();
    const h = await harness({ path });
    await h.p.createPod(pod({ ns: "team", name: "a" }));
    expect(h.sandboxd.claimRequests).toEqual([{ template: "python", ttl_seconds: 86_400, claim_ref: "team/a", metadata: claimMetadataOf("a") }]);
    const pushed = h.pushes[0]!;
    const id = h.sandboxd.ids()[0]!;
    expect(pushed.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(id);
    expect(pushed.status?.phase).toBe("Running");
    expect(pushed.status?.podIP).toBe("10.0.0.5");
    expect(pushed.status?.hostIP).toBe("10.0.0.5");
    expect(pushed.status?.startTime).toEqual(new Date(h.clock.now()));
    expect(h.p.getPod("team", "a")?.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(id);
    const row = readTable(path).claims["team/a"];
    expect(row.id).toBe(id);
    expect(row.podUID).toBe("uid-a");
    expect(row.authority).toBe("owner-a");
  });

  test("net, size and ttl annotations shape the claim body; ttl 0 omits ttl_seconds", async () => {
    const h = await harness({ path: statePath() });
    await h.p.createPod(
      pod({ name: "a", annotations: { "sandbox.cocoonstack.io/net": "egress", "sandbox.cocoonstack.io/size": "large", "sandbox.cocoonstack.io/ttl-seconds": "+600" } }),
    );
    await h.p.createPod(pod({ name: "b", annotations: { "sandbox.cocoonstack.io/ttl-seconds": "0" } }));
    expect(h.sandboxd.claimRequests[0]).toEqual({
      template: "python",
      net: "egress",
      size: "large",
      ttl_seconds: 600,
      claim_ref: "default/a",
      metadata: claimMetadataOf("a"),
    });
    expect(h.sandboxd.claimRequests[1]).toEqual({ template: "python", claim_ref: "default/b", metadata: claimMetadataOf("b") });
    expect("ttl_seconds" in h.sandboxd.claimRequests[1]!).toBe(false);
  });

  for (const [what, annotations] of [
    ["ttl abc", { "sandbox.cocoonstack.io/ttl-seconds": "abc" }],
    ["ttl -1", { "sandbox.cocoonstack.io/ttl-seconds": "-1" }],
    ["ttl 1.5", { "sandbox.cocoonstack.io/ttl-seconds": "1.5" }],
    ["no template", { "sandbox.cocoonstack.io/template": "" }],
    ["runtime vk-cocoon", { "sandbox.cocoonstack.io/runtime": "vk-cocoon" }],
  ] as const) {
    test(`an invalid pod (${what}) fails before any claim`, async () => {
      const h = await harness({ path: statePath() });
      const err = await h.p.createPod(pod({ annotations: { ...annotations } })).catch((e) => e);
      expect(err).toBeInstanceOf(ProviderError);
      expect(err.code).toBe("invalid-pod");
      expect(h.sandboxd.claimCalls.n).toBe(0);
      expect(h.pushes).toHaveLength(0);
    });
  }

  test("sandboxd at capacity fails the create with no row; a retry once capacity returns claims exactly once", async () => {
    const path = statePath();
    const h = await harness({ path });
    h.sandboxd.failNextClaim();
    const err = await h.p.createPod(pod()).catch((e) => e);
    expect(err.code).toBe("claim-failed");
    expect(err.transient).toBe(false);
    expect(readTable(path).claims).toEqual({});
    expect(h.p.getPod("default", "sb1")).toBeUndefined();
    await h.p.createPod(pod());
    expect(h.sandboxd.claimCalls.n).toBe(2);
    expect(h.sandboxd.ids().length).toBe(1);
    expect(h.pushes.at(-1)?.status?.phase).toBe("Running");
  });

  test("a claim that cannot be persisted is released, not reported Running, and leaves no row", async () => {
    const path = statePath();
    const h = await harness({ path });
    const restore = breakDir(path);
    const err = await h.p.createPod(pod()).catch((e) => e);
    restore();
    expect(err.code).toBe("state-write-failed");
    expect(h.sandboxd.claimCalls.n).toBe(1);
    expect(h.sandboxd.ids().length).toBe(0);
    expect(h.sandboxd.released).toHaveLength(1);
    expect(h.pushes).toHaveLength(0);
    expect(h.p.getPod("default", "sb1")).toBeUndefined();
    expect(h.impl.core.st.claims.size).toBe(0);
  });

  test("when the write and its undo both fail, the stranded sandbox is released before a fresh claim", async () => {
    const path = statePath();
    const h = await harness({ path });
    const restore = breakDir(path);
    h.sandboxd.failReleases(true);
    const err = await h.p.createPod(pod()).catch((e) => e);
    expect(err.code).toBe("state-write-failed");
    expect(err.message).toContain("releasing sandbox");
    const stranded = h.sandboxd.ids()[0]!;
    // Kept tentative in memory: never Running, never in the file, GetPod differs (it carries the annotation).
    expect(h.pushes).toHaveLength(0);
    expect(h.p.getPodStatus("default", "sb1")?.phase).toBe("Pending");
    expect(h.p.getPod("default", "sb1")?.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(stranded);
    restore();
    h.sandboxd.failReleases(false);
    // The controller sees GetPod differ and calls UpdatePod, which re-runs the create.
    await h.p.updatePod(pod());
    expect(h.sandboxd.released[0]).toBe(stranded);
    expect(h.sandboxd.claimCalls.n).toBe(2);
    const fresh = readTable(path).claims["default/sb1"].id;
    expect(fresh).not.toBe(stranded);
    expect(h.pushes.at(-1)?.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(fresh);
  });

  test("a tentative claim is never in another writer's snapshot", async () => {
    const path = statePath();
    const h = await harness({ path });
    const restore = breakDir(path);
    h.sandboxd.failReleases(true);
    await h.p.createPod(pod({ name: "stranded" })).catch(() => undefined);
    restore();
    h.sandboxd.failReleases(false);
    await h.p.createPod(pod({ name: "other" }));
    expect(Object.keys(readTable(path).claims)).toEqual(["default/other"]);
  });

  test("50 concurrent creates leave a valid file with 50 rows matching the annotations, in fewer writes", async () => {
    const path = statePath();
    const h = await harness({ path });
    const open = h.sandboxd.holdClaims();
    const writesBefore = h.impl.core.st.writes;
    const all = Array.from({ length: 50 }, (_, i) => h.p.createPod(pod({ name: `p${i}` })));
    await h.sandboxd.claimCalls.until(50);
    open();
    await Promise.all(all);
    const file = readTable(path);
    expect(ClaimsFileSchema.safeParse(file).success).toBe(true);
    expect(Object.keys(file.claims)).toHaveLength(50);
    for (const pushed of h.pushes) {
      const key = `${pushed.metadata?.namespace}/${pushed.metadata?.name}`;
      expect(file.claims[key].id).toBe(pushed.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]);
    }
    expect(h.pushes).toHaveLength(50);
    expect(h.impl.core.st.writes - writesBefore).toBeLessThan(50);
  });

  test("no pod is reported Running before a write containing its own row has landed", async () => {
    const path = statePath();
    const h = await harness({ path });
    // Every push must find its row already on disk.
    h.p.notifyPods((p) => {
      const key = `${p.metadata?.namespace}/${p.metadata?.name}`;
      expect(readTable(path).claims[key]?.id).toBe(p.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]);
      h.pushes.push(p);
    });
    const all: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      all.push(h.p.createPod(pod({ name: `p${i}` })));
      if (i % 3 === 0) await new Promise((r) => setImmediate(r));
    }
    await Promise.all(all);
    expect(h.pushes).toHaveLength(20);
  });

  test("a preserved claim is released via the releasing list when a bare pod of the same name arrives, which claims fresh", async () => {
    const path = statePath();
    const h = await harness({ path });
    h.owners!.alive("sb1", "owner-sb1");
    await h.p.createPod(pod());
    const old = readTable(path).claims["default/sb1"].id;
    await h.p.deletePod(pod());
    expect(readTable(path).claims["default/sb1"].owner.uid).toBe("owner-sb1");
    await h.p.createPod(bare({ uid: "bare-uid" }));
    const table = readTable(path);
    expect(table.claims["default/sb1"].id).not.toBe(old);
    expect(table.releasing.map((r: { id: string }) => r.id)).toEqual([old]);
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.released).toEqual([old]);
    expect(readTable(path).releasing).toBeUndefined();
  });

  test("a pod of another controller does not adopt a preserved claim", async () => {
    const h = await harness({ path: statePath() });
    h.owners!.alive("sb1", "owner-sb1");
    await h.p.createPod(pod());
    const old = h.sandboxd.ids()[0]!;
    await h.p.deletePod(pod());
    await h.p.createPod(pod({ uid: "new-pod", owner: { name: "other", uid: "other-owner" } }));
    expect(h.sandboxd.claimCalls.n).toBe(2);
    expect(h.impl.core.st.releasing.map((e) => e.claim.id)).toEqual([old]);
  });

  test("a row with authority X is released when a same-name pod with authority Y and another UID arrives", async () => {
    const path = statePath();
    const h = await harness({ path });
    await h.p.createPod(pod({ owner: { name: "sb1", uid: "X" } }));
    const old = readTable(path).claims["default/sb1"];
    expect(old.authority).toBe("X");
    // No delete reached us (e.g. a restart in between): the same key, another owner, another UID.
    await h.p.createPod(pod({ uid: "other", owner: { name: "sb1", uid: "Y" } }));
    const table = readTable(path);
    expect(table.claims["default/sb1"].id).not.toBe(old.id);
    expect(table.claims["default/sb1"].authority).toBe("Y");
    expect(table.releasing[0].id).toBe(old.id);
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.released).toEqual([old.id]);
  });

  test("a same-name pod of the same owner adopts the preserved claim without a claim call and clears owner", async () => {
    const path = statePath();
    const h = await harness({ path });
    h.owners!.alive("sb1", "owner-sb1");
    await h.p.createPod(pod());
    const id = readTable(path).claims["default/sb1"].id;
    const startTime = h.pushes[0]!.status?.startTime;
    await h.p.deletePod(pod());
    h.clock.advance(60_000);
    await h.p.createPod(pod({ uid: "replacement" }));
    expect(h.sandboxd.claimCalls.n).toBe(1);
    const row = readTable(path).claims["default/sb1"];
    expect(row.id).toBe(id);
    expect(row.podUID).toBe("replacement");
    expect(row.owner).toBeUndefined();
    expect(h.pushes.at(-1)?.status?.startTime).toEqual(startTime);
    expect(h.pushes.at(-1)?.metadata?.uid).toBe("replacement");
  });

  test("a create on a key whose row is past its deadline while listing fails fails and keeps the row", async () => {
    const path = statePath();
    const clock = new FakeClock();
    const h = await harness({ path, clock, sandboxd: await makeSandboxd(clock) });
    await h.p.createPod(pod({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": "60" } }));
    const id = readTable(path).claims["default/sb1"].id;
    clock.advance(61_000);
    h.sandboxd.failLists(true);
    const err = await h.p.createPod(pod()).catch((e) => e);
    expect(err.code).toBe("sandboxd-unavailable");
    expect(err.transient).toBe(true);
    expect(h.impl.core.st.claims.get("default/sb1")?.id).toBe(id);
    expect(h.sandboxd.claimCalls.n).toBe(1);
  });

  test("a past-deadline row that is no longer listed is dropped and the pod claims fresh", async () => {
    const clock = new FakeClock();
    const h = await harness({ path: statePath(), clock, sandboxd: await makeSandboxd(clock) });
    await h.p.createPod(pod({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": "60" } }));
    const old = h.sandboxd.ids()[0]!;
    clock.advance(61_000);
    h.sandboxd.vanish(old); // reaped
    await h.p.createPod(pod());
    expect(h.sandboxd.claimCalls.n).toBe(2);
    expect(h.impl.core.st.claims.get("default/sb1")?.id).not.toBe(old);
  });

  test("a past-deadline row still listed with a later deadline is adopted with that deadline", async () => {
    const clock = new FakeClock();
    const h = await harness({ path: statePath(), clock, sandboxd: await makeSandboxd(clock) });
    await h.p.createPod(pod({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": "60" } }));
    const id = h.sandboxd.ids()[0]!;
    clock.advance(61_000);
    h.sandboxd.setDeadline(id, clock.now() + 3_600_000);
    await h.p.createPod(pod());
    expect(h.sandboxd.claimCalls.n).toBe(1);
    expect(h.impl.core.st.claims.get("default/sb1")?.deadline).toBe(clock.now() + 3_600_000);
  });

  test("two creates racing for one key claim once; the second adopts the first's claim", async () => {
    const h = await harness({ path: statePath() });
    await Promise.all([h.p.createPod(pod()), h.p.createPod(pod())]);
    expect(h.sandboxd.claimCalls.n).toBe(1);
    expect(h.pushes.map((p) => p.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"])).toEqual([h.sandboxd.ids()[0], h.sandboxd.ids()[0]]);
  });

  test("an undo release that hangs gives up after its own 10 s and keeps the claim tentative", async () => {
    const path = statePath();
    const h = await harness({ path });
    const restore = breakDir(path);
    h.sandboxd.holdReleases();
    const create = h.p.createPod(pod()).catch((e) => e);
    await h.sandboxd.releaseCalls.until(1);
    h.clock.advance(10_000);
    const err = await create;
    restore();
    expect(err.code).toBe("state-write-failed");
    expect(err.message).toContain("timed out");
    expect(h.impl.core.st.tentative.has("default/sb1")).toBe(true);
    expect(h.pushes).toHaveLength(0);
  });
});
