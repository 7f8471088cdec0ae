import { describe, expect, test } from "bun:test";

import { join } from "node:path";
import { bare, FakeClock, FakeOwners, harness, makeSandboxd, pod, readTable, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();
const statePath = () => join(tmp(), "claims.json");

describe("DeletePod", () => {
  test("a bare pod's deletion releases its sandbox, drops the row and rewrites the file", async () => {
    const path = statePath();
    const h = await harness({ path });
    await h.p.createPod(bare());
    const id = readTable(path).claims["default/sb1"].id;
    await h.p.deletePod(bare());
    expect(h.sandboxd.released).toEqual([id]);
    expect(readTable(path)).toEqual({ claims: {} });
    expect(h.p.getPod("default", "sb1")).toBeUndefined();
    expect(h.p.getPods()).toHaveLength(0);
  });

  test("a live owner preserves the claim: no release, the row gains owner, the pod entry goes", async () => {
    const path = statePath();
    const h = await harness({ path });
    h.owners!.alive("sb1", "owner-sb1");
    await h.p.createPod(pod());
    await h.p.deletePod(pod());
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(readTable(path).claims["default/sb1"].owner).toEqual({
      apiVersion: "agents.x-k8s.io/v1beta1",
      kind: "Sandbox",
      name: "sb1",
      uid: "owner-sb1",
      controller: true,
      blockOwnerDeletion: true,
    });
    expect(h.p.getPod("default", "sb1")).toBeUndefined();
    expect(h.owners!.targets[0]).toMatchObject({ group: "agents.x-k8s.io", version: "v1beta1", resource: "sandboxes", name: "sb1" });
  });

  const releasing: Array<[string, (o: FakeOwners) => void]> = [
    ["the owner is not found by name", (o) => o.gone("sb1")],
    ["the owner is being deleted", (o) => o.alive("sb1", "owner-sb1", { metadata: { uid: "owner-sb1", deletionTimestamp: "2026-07-27T00:00:00Z" } })],
    ["the owner's uid rotated", (o) => o.alive("sb1", "a-new-generation")],
    ["the owner's Ready reason is SandboxExpired", (o) => o.alive("sb1", "owner-sb1", { status: { conditions: [{ type: "Ready", reason: "SandboxExpired" }] } })],
  ];
  for (const [what, arrange] of releasing) {
    test(`the sandbox is released when ${what}`, async () => {
      const path = statePath();
      const h = await harness({ path });
      await h.p.createPod(pod());
      arrange(h.owners!);
      await h.p.deletePod(pod());
      expect(h.sandboxd.released).toHaveLength(1);
      expect(readTable(path).claims).toEqual({});
    });
  }

  const preserving: Array<[string, (o: FakeOwners) => void]> = [
    ["the owner's Ready reason is SandboxSuspended", (o) => o.alive("sb1", "owner-sb1", { status: { conditions: [{ type: "Ready", reason: "SandboxSuspended" }] } })],
    ["the owner read is a 404 without details.name", (o) => o.set("sb1", { outcome: "not-found" })],
    ["the owner read is a 404 naming something else", (o) => o.set("sb1", { outcome: "not-found", detailsName: "sandboxes" })],
    ["the owner read is forbidden", (o) => o.set("sb1", { outcome: "error", error: new Error("403 Forbidden") })],
  ];
  for (const [what, arrange] of preserving) {
    test(`the row is preserved when ${what}`, async () => {
      const path = statePath();
      const h = await harness({ path });
      await h.p.createPod(pod());
      arrange(h.owners!);
      await h.p.deletePod(pod());
      expect(h.sandboxd.releaseCalls.n).toBe(0);
      expect(readTable(path).claims["default/sb1"].owner.uid).toBe("owner-sb1");
    });
  }

  test("without an owner reader an owned pod's claim is preserved", async () => {
    const path = statePath();
    const h = await harness({ path, owners: null });
    await h.p.createPod(pod());
    await h.p.deletePod(pod());
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(readTable(path).claims["default/sb1"].owner).toBeDefined();
  });

  test("an owner with an unparsable apiVersion or no kind is preserved without a read", async () => {
    const h = await harness({ path: statePath() });
    await h.p.createPod(pod({ owner: { name: "sb1", uid: "owner-sb1", apiVersion: "a/b/c" } }));
    await h.p.deletePod(pod({ owner: { name: "sb1", uid: "owner-sb1", apiVersion: "a/b/c" } }));
    await h.p.createPod(pod({ name: "k", owner: { name: "k", uid: "owner-k", kind: "" } }));
    await h.p.deletePod(pod({ name: "k", owner: { name: "k", uid: "owner-k", kind: "" } }));
    expect(h.owners!.reads.n).toBe(0);
    expect(h.sandboxd.releaseCalls.n).toBe(0);
  });

  test("a failed release keeps the row and fails the delete; a retry releases, and a 404 counts as released", async () => {
    const path = statePath();
    const h = await harness({ path });
    await h.p.createPod(bare());
    h.sandboxd.failReleases(true);
    const err = await h.p.deletePod(bare()).catch((e) => e);
    expect(err.code).toBe("release-failed");
    expect(readTable(path).claims["default/sb1"]).toBeDefined();
    expect(h.p.getPod("default", "sb1")).toBeDefined();
    h.sandboxd.failReleases(false);
    h.sandboxd.vanishAll(); // already gone on the node: the release answers 404
    await h.p.deletePod(bare());
    expect(readTable(path).claims).toEqual({});
  });

  test("a delete or update carrying an old UID is ignored while a newer pod holds the key", async () => {
    const path = statePath();
    const h = await harness({ path });
    await h.p.createPod(bare({ uid: "new" }));
    await h.p.deletePod(bare({ uid: "old" }));
    await h.p.updatePod(bare({ uid: "old", annotations: { changed: "yes" } }));
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(readTable(path).claims["default/sb1"]).toBeDefined();
    expect(h.p.getPod("default", "sb1")?.metadata?.uid).toBe("new");
    expect(h.p.getPod("default", "sb1")?.metadata?.annotations?.changed).toBeUndefined();
  });

  test("a delete for a key without a row just forgets the pod", async () => {
    const h = await harness({ path: statePath() });
    await h.p.deletePod(bare());
    expect(h.sandboxd.releaseCalls.n).toBe(0);
  });

  test("an update stores the pod without sandboxd I/O and keeps the claim-id annotation", async () => {
    const h = await harness({ path: statePath() });
    await h.p.createPod(bare());
    const calls = h.sandboxd.claimCalls.n + h.sandboxd.listCalls.n;
    await h.p.updatePod(bare({ annotations: { "example.com/x": "1" } }));
    expect(h.sandboxd.claimCalls.n + h.sandboxd.listCalls.n).toBe(calls);
    const stored = h.p.getPod("default", "sb1")!;
    expect(stored.metadata?.annotations?.["example.com/x"]).toBe("1");
    expect(stored.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBeDefined();
  });

  test("a delete repeated after it succeeded is harmless", async () => {
    const h = await harness({ path: statePath() });
    await h.p.createPod(bare());
    await h.p.deletePod(bare());
    await h.p.deletePod(bare());
    expect(h.sandboxd.releaseCalls.n).toBe(1);
  });
});

describe("issue 7 case 7: a failed write after preserve", () => {
  test("fails the delete and keeps the pod entry, so the retry persists the owner the re-check needs after a restart", async () => {
    const { mkdirSync, rmSync, writeFileSync } = await import("node:fs");
    const dir = join(tmp(), "state");
    const path = join(dir, "claims.json");
    const clock = new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
    const sandboxd = await makeSandboxd(clock);
    const owners = new FakeOwners();
    owners.alive("sb1", "owner-sb1");
    const h = await harness({ path, clock, sandboxd, owners });
    await h.p.createPod(pod());
    const id = readTable(path).claims["default/sb1"].id;

    // The directory becomes a file: the preserve's write fails.
    rmSync(dir, { recursive: true, force: true });
    writeFileSync(dir, "blocker");
    const err = await h.p.deletePod(pod()).then(
      () => undefined,
      (e: { code?: string }) => e,
    );
    expect(err?.code).toBe("state-write-failed");
    // The controller's retry reaches the provider only through the stored pod: it must still be there.
    expect(h.p.getPod("default", "sb1")?.metadata?.uid).toBe("uid-sb1");

    rmSync(dir);
    mkdirSync(dir);
    await h.p.deletePod(pod());
    expect(readTable(path).claims["default/sb1"]).toMatchObject({ id, owner: { name: "sb1", uid: "owner-sb1" } });
    await h.stop();

    // Restart: the row is back with its owner; the owner goes; the re-check releases the sandbox.
    owners.gone("sb1");
    const h2 = await harness({ path, clock, sandboxd, owners });
    await h2.impl.tick("verify");
    await h2.impl.tick("owner-recheck");
    await h2.impl.tick("owner-recheck");
    expect(sandboxd.released).toEqual([id]);
    expect(readTable(path).claims).toEqual({});
  });
});
