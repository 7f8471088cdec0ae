// Startup and restart: load, quarantine, verification, the startup write (§1.1 step 7, §5.9).
import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ClaimsStateError } from "#services/vk-sandbox/claims/errors.ts";
import { FakeClock, FakeOwners, harness, makeSandboxd, pod, readTable, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();

/** Run pods to Running, then "SIGKILL": drop the provider without stopping it and start a new one. */
async function runThenRestart(path: string, names: string[]) {
  const clock = new FakeClock();
  const sandboxd = await makeSandboxd(clock);
  const h = await harness({ path, clock, sandboxd });
  for (const name of names) await h.p.createPod(pod({ name }));
  const before = new Map(h.pushes.map((p) => [p.metadata!.name!, p]));
  clock.advance(90_000);
  return { clock, sandboxd, before };
}

describe("startup", () => {
  test("with no state file or directory, the directory is 0700 and the file 0600 holding an empty table", async () => {
    const path = join(tmp(), "var", "lib", "vk-sandbox", "claims.json");
    await harness({ path });
    expect(readFileSync(path, "utf8")).toBe('{"claims":{}}');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(path, "..")).mode & 0o777).toBe(0o700);
  });

  test("a malformed state file is fatal and left unchanged", async () => {
    const path = join(tmp(), "claims.json");
    writeFileSync(path, '{"claims":{"a/b":');
    const err = await harness({ path }).catch((e) => e);
    expect(err).toBeInstanceOf(ClaimsStateError);
    expect(err.message).toContain(path);
    expect(readFileSync(path, "utf8")).toBe('{"claims":{"a/b":');
  });

  test("an unwritable state path is fatal: claims state is not writable", async () => {
    // As root, a read-only directory does not stop us; a directory where the tmp file must go does.
    const d = tmp();
    mkdirSync(join(d, "claims.json.tmp"));
    const err = await harness({ path: join(d, "claims.json") }).catch((e) => e);
    expect(err).toBeInstanceOf(ClaimsStateError);
    expect(err.message).toContain("claims state is not writable");
  });

  test("after a kill, every pod keeps its claim id and startTime without a claim call", async () => {
    const path = join(tmp(), "claims.json");
    const { clock, sandboxd, before } = await runThenRestart(path, ["a", "b", "c"]);
    const h = await harness({ path, clock, sandboxd });
    for (const name of ["a", "b", "c"]) await h.p.createPod(pod({ name }));
    expect(sandboxd.claimCalls.n).toBe(3);
    for (const pushed of h.pushes) {
      const old = before.get(pushed.metadata!.name!)!;
      expect(pushed.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(old.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]);
      expect(pushed.status?.startTime).toEqual(old.status?.startTime);
    }
  });

  test("restarted while sandboxd is down: rows stay quarantined, creates fail without claims, and recover on a later verification", async () => {
    const path = join(tmp(), "claims.json");
    const { clock, sandboxd, before } = await runThenRestart(path, ["a"]);
    sandboxd.failLists(true);
    const h = await harness({ path, clock, sandboxd });
    expect(h.impl.core.st.quarantined.size).toBe(1);
    expect(readTable(path).claims.a).toBeUndefined();
    expect(Object.keys(readTable(path).claims)).toEqual(["default/a"]);
    const err = await h.p.createPod(pod({ name: "a" })).catch((e) => e);
    expect(err.code).toBe("sandboxd-unavailable");
    expect(err.transient).toBe(true);
    expect(h.p.getPod("default", "a")).toBeUndefined();
    expect(sandboxd.claimCalls.n).toBe(1);
    expect(sandboxd.releaseCalls.n).toBe(0);
    sandboxd.failLists(false);
    expect(await h.impl.tick("verify")).toBe(true);
    await h.p.createPod(pod({ name: "a" }));
    expect(sandboxd.claimCalls.n).toBe(1);
    expect(h.pushes.at(-1)?.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(
      before.get("a")!.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"],
    );
  });

  test("a create on a quarantined key verifies on the spot once sandboxd is back", async () => {
    const path = join(tmp(), "claims.json");
    const { clock, sandboxd } = await runThenRestart(path, ["a"]);
    sandboxd.failLists(true);
    const h = await harness({ path, clock, sandboxd });
    sandboxd.failLists(false);
    await h.p.createPod(pod({ name: "a" }));
    expect(sandboxd.claimCalls.n).toBe(1);
    expect(h.pushes.at(-1)?.status?.phase).toBe("Running");
  });

  test("a row whose sandbox is no longer listed is dropped at restart and the pod claims fresh", async () => {
    const path = join(tmp(), "claims.json");
    const { clock, sandboxd } = await runThenRestart(path, ["a"]);
    const old = sandboxd.ids()[0]!;
    sandboxd.vanish(old);
    const h = await harness({ path, clock, sandboxd });
    expect(readTable(path).claims).toEqual({});
    await h.p.createPod(pod({ name: "a" }));
    expect(sandboxd.claimCalls.n).toBe(2);
    expect(sandboxd.releaseCalls.n).toBe(0);
  });

  test("an older table without claimedAt or deadline loads, gets claimedAt written back and the deadline from the listing", async () => {
    const path = join(tmp(), "claims.json");
    const clock = new FakeClock();
    const sandboxd = await makeSandboxd(clock);
    const reply = await sandboxd.claim({ template: "python", claim_ref: "default/a" });
    writeFileSync(path, JSON.stringify({ claims: { "default/a": { id: reply.id, token: reply.token, address: reply.owner_addr, podUID: "uid-a" } } }));
    clock.advance(1234);
    const h = await harness({ path, clock, sandboxd });
    const row = readTable(path).claims["default/a"];
    const filled = Math.floor(clock.now() / 1000) * 1000;
    expect(row.claimedAt).toBe(new Date(filled).toISOString().replace(".000Z", "Z"));
    expect(row.deadline).toBe(reply.deadline.replace(/\.\d+Z$/, "Z"));
    // Legacy table: no authority, so any same-key pod adopts, and its startTime stays the filled-in time.
    await h.p.createPod(pod({ name: "a", uid: "someone", owner: { name: "x", uid: "y" } }));
    expect(sandboxd.claimCalls.n).toBe(1);
    expect(h.pushes.at(-1)?.status?.startTime).toEqual(new Date(filled));
    clock.advance(5000);
    await h.p.createPod(pod({ name: "a", uid: "someone", owner: { name: "x", uid: "y" } }));
    expect(h.pushes.at(-1)?.status?.startTime).toEqual(new Date(filled));
  });

  test("quarantined rows are releasable but not adopted, not Running and not re-checked", async () => {
    const path = join(tmp(), "claims.json");
    const { clock, sandboxd } = await runThenRestart(path, ["a", "b"]);
    sandboxd.failLists(true);
    const owners = new FakeOwners();
    const h = await harness({ path, clock, sandboxd, owners });
    await h.impl.tick("owner-recheck");
    expect(owners.reads.n).toBe(0);
    await h.p.deletePod(pod({ name: "b", owner: null }));
    expect(sandboxd.released).toHaveLength(1);
    expect(Object.keys(readTable(path).claims)).toEqual(["default/a"]);
  });

  test("the verification loop stops once a listing succeeded with nothing quarantined", async () => {
    const path = join(tmp(), "claims.json");
    const { clock, sandboxd } = await runThenRestart(path, ["a"]);
    sandboxd.failLists(true);
    const h = await harness({ path, clock, sandboxd });
    h.start();
    const verify = h.impl.loop("claim-verification");
    clock.advance(15_000);
    await verify.untilTicks(1);
    expect(h.impl.core.st.quarantined.size).toBe(1);
    sandboxd.failLists(false);
    clock.advance(15_000);
    await verify.untilTicks(2);
    expect(h.impl.core.st.quarantined.size).toBe(0);
    expect(verify.active).toBe(false);
    clock.advance(60_000);
    await h.stop();
    expect(verify.completed).toBe(2);
  });
});
