// Recovery of claims sandboxd delivered but the claims table never recorded (a crash between the claim reply
// and the state write), and the create gate that keeps a Pod from claiming a second sandbox meanwhile.
// The "crash" is reproduced exactly: the very claim the provider would send is made on the node, and its reply
// never reaches any table; then a provider starts on the same state file and the same sandboxd.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { claimMetadata, METADATA_AUTHORITY, METADATA_NODE, METADATA_POD_UID } from "#services/vk-sandbox/provider/claim-metadata.ts";
import { claimRequestFor } from "#services/vk-sandbox/provider/pod-contract.ts";
import {
  bare,
  claimMetadataOf,
  FakeClock,
  harness,
  makeSandboxd,
  NODE_NAME,
  pod,
  readTable,
  type SandboxdDouble,
  scratchDirs,
} from "./helpers.ts";

const tmp = scratchDirs();
const statePath = () => join(tmp(), "state", "claims.json");
const wire = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
const claimIdOf = (p: V1Pod | undefined) => p?.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"];

/** sandboxd delivers the claim the provider on `node` would make for `p`; the reply is lost with the process. */
async function crashAfterClaim(sandboxd: SandboxdDouble, p: V1Pod, node = NODE_NAME) {
  const reply = await sandboxd.claimUnrecorded({ ...claimRequestFor(p), metadata: claimMetadata(node, p) });
  return reply;
}

async function setup() {
  const clock = new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
  const sandboxd = await makeSandboxd(clock);
  return { clock, sandboxd, path: statePath() };
}

describe("claim metadata", () => {
  test("every claim carries this node, the Pod's UID and its authority, and the listing echoes them", async () => {
    const { clock, sandboxd, path } = await setup();
    const h = await harness({ path, clock, sandboxd });
    await h.p.createPod(pod({ name: "a" }));
    await h.p.createPod(bare({ name: "b" }));
    expect(h.sandboxd.claimRequests.map((r) => r.metadata)).toEqual([claimMetadataOf("a"), claimMetadataOf("b", { authority: "uid-b" })]);
    const rows = await sandboxd.list();
    const byRef = new Map(rows.map((r) => [r.claim_ref, r.metadata]));
    expect(byRef.get("default/a")).toEqual({ [METADATA_NODE]: NODE_NAME, [METADATA_POD_UID]: "uid-a", [METADATA_AUTHORITY]: "owner-a" });
    expect(byRef.get("default/b")).toEqual({ [METADATA_NODE]: NODE_NAME, [METADATA_POD_UID]: "uid-b", [METADATA_AUTHORITY]: "uid-b" });
  });
});

describe("recovery of a delivered but unrecorded claim", () => {
  test("is recorded at startup with the sandbox's own token, and the Pod adopts it with no claim call", async () => {
    const { clock, sandboxd, path } = await setup();
    const p = pod({ name: "a" });
    const claimedAt = clock.now();
    const reply = await crashAfterClaim(sandboxd, p);
    clock.advance(42_000);
    const claims0 = sandboxd.claimCalls.n;

    const h = await harness({ path, clock, sandboxd });
    // The startup write finished the interrupted one: the row is on disk before any Pod is served.
    expect(readTable(path).claims["default/a"]).toEqual({
      id: reply.id,
      token: reply.token,
      address: "10.0.0.5:7777",
      podUID: "uid-a",
      // The Pod UID, not the stamped owner: only the Pod the stamp names may adopt a recovered row.
      authority: "uid-a",
      claimedAt: wire(claimedAt),
      deadline: wire(Date.parse(reply.deadline)),
    });
    expect(h.lines.some((l) => l.claimId === reply.id && String(l.msg).includes("recovered"))).toBe(true);

    await h.p.createPod(p);
    expect(sandboxd.claimCalls.n).toBe(claims0);
    expect(sandboxd.ids()).toEqual([reply.id]);
    const pushed = h.pushes.at(-1)!;
    expect(pushed.status?.phase).toBe("Running");
    expect(claimIdOf(pushed)).toBe(reply.id);
    expect(pushed.status?.startTime).toEqual(new Date(Math.floor(claimedAt / 1000) * 1000));
  });

  test("a deletion of the Pod then releases it with the recovered token", async () => {
    const { clock, sandboxd, path } = await setup();
    const p = bare({ name: "a" });
    const reply = await crashAfterClaim(sandboxd, p);
    const h = await harness({ path, clock, sandboxd });
    await h.p.createPod(p);
    await h.p.deletePod(p);
    expect(sandboxd.released).toEqual([reply.id]);
    expect(sandboxd.ids()).toEqual([]);
    expect(readTable(path).claims).toEqual({});
  });

  test("a claim made by another node's vk-sandbox, or by someone else for the same claim_ref, is not taken", async () => {
    const { clock, sandboxd, path } = await setup();
    const p = pod({ name: "a" });
    const other = await crashAfterClaim(sandboxd, p, "vk-other");
    const external = await sandboxd.addForeign("default/a");
    const h = await harness({ path, clock, sandboxd });
    expect(readTable(path).claims).toEqual({});
    await h.p.createPod(p);
    const row = readTable(path).claims["default/a"];
    expect([other.id, external]).not.toContain(row.id);
    expect(sandboxd.has(other.id) && sandboxd.has(external)).toBe(true);
  });

  test("waits for sandboxd when the first listing fails: creates fail transient without claiming, then adopt", async () => {
    const { clock, sandboxd, path } = await setup();
    const p = pod({ name: "a" });
    const reply = await crashAfterClaim(sandboxd, p);
    const claims0 = sandboxd.claimCalls.n;
    sandboxd.failLists(true);

    const h = await harness({ path, clock, sandboxd });
    expect(readTable(path).claims).toEqual({});
    // Neither the key with the unrecorded claim nor any other key without a row may claim yet: nothing rules
    // out an unrecorded claim for it until a listing succeeds.
    for (const q of [p, pod({ name: "fresh" })]) {
      const err = await h.p.createPod(q).catch((e) => e);
      expect(err.code).toBe("sandboxd-unavailable");
      expect(err.transient).toBe(true);
    }
    expect(sandboxd.claimCalls.n).toBe(claims0);
    expect(h.pushes).toHaveLength(0);

    // The verification loop keeps running and recovers it once sandboxd lists again.
    h.start();
    const verify = h.impl.loop("claim-verification");
    clock.advance(15_000);
    await verify.untilTicks(1);
    expect(verify.active).toBe(true);
    sandboxd.failLists(false);
    clock.advance(15_000);
    await verify.untilTicks(2);
    expect(verify.active).toBe(false);
    expect(readTable(path).claims["default/a"].id).toBe(reply.id);
    expect(readTable(path).claims["default/a"].token).toBe(reply.token);

    await h.p.createPod(p);
    await h.p.createPod(pod({ name: "fresh" }));
    expect(sandboxd.claimCalls.n).toBe(claims0 + 1);
    expect(claimIdOf(h.p.getPod("default", "a"))).toBe(reply.id);
    await h.stop();
  });

  test("a create after sandboxd returns verifies on the spot and adopts, without waiting for the loop", async () => {
    const { clock, sandboxd, path } = await setup();
    const p = pod({ name: "a" });
    const reply = await crashAfterClaim(sandboxd, p);
    const claims0 = sandboxd.claimCalls.n;
    sandboxd.failLists(true);
    const h = await harness({ path, clock, sandboxd });
    sandboxd.failLists(false);
    await h.p.createPod(p);
    expect(sandboxd.claimCalls.n).toBe(claims0);
    expect(claimIdOf(h.pushes.at(-1))).toBe(reply.id);
    expect(readTable(path).claims["default/a"].id).toBe(reply.id);
  });

  test("a transient failure reading the token keeps the key blocked until a later pass recovers it", async () => {
    const { clock, sandboxd, path } = await setup();
    const p = pod({ name: "a" });
    const reply = await crashAfterClaim(sandboxd, p);
    const claims0 = sandboxd.claimCalls.n;
    sandboxd.failReads(true);
    const h = await harness({ path, clock, sandboxd });
    expect(readTable(path).claims).toEqual({});
    const err = await h.p.createPod(p).catch((e) => e);
    expect(err.code).toBe("sandboxd-unavailable");
    expect(err.transient).toBe(true);
    // Other keys are not held up by it.
    await h.p.createPod(pod({ name: "b" }));
    expect(sandboxd.claimCalls.n).toBe(claims0 + 1);
    expect(h.impl.verifier.finished).toBe(false);

    sandboxd.failReads(false);
    await h.p.createPod(p);
    expect(sandboxd.claimCalls.n).toBe(claims0 + 1);
    expect(claimIdOf(h.pushes.at(-1))).toBe(reply.id);
    expect(h.impl.verifier.finished).toBe(true);
  });

  test("without the root token its token cannot be read: warned once, left to the orphan audit, the Pod claims fresh", async () => {
    const { clock, sandboxd, path } = await setup();
    const p = pod({ name: "a" });
    const reply = await crashAfterClaim(sandboxd, p);
    sandboxd.withoutRootToken();
    const claims0 = sandboxd.claimCalls.n;
    const h = await harness({ path, clock, sandboxd });
    expect(readTable(path).claims).toEqual({});
    await h.impl.verifier.verifyOnce();
    const warnings = h.lines.filter((l) => l.claimId === reply.id && String(l.msg).includes("orphan audit"));
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0]!.msg)).toContain(reply.id);
    expect(h.impl.verifier.finished).toBe(true);

    await h.p.createPod(p);
    expect(sandboxd.claimCalls.n).toBe(claims0 + 1);
    expect(readTable(path).claims["default/a"].id).not.toBe(reply.id);
    await h.impl.tick("orphan-scan");
    expect(h.lines.some((l) => l.sandboxId === reply.id && l.verdict === "external")).toBe(true);
    expect(sandboxd.has(reply.id)).toBe(true);
  });

  test("a key that already holds another row gets the stray on the releasing list, on disk before it is released", async () => {
    const { clock, sandboxd, path } = await setup();
    const p = pod({ name: "a" });
    const first = await harness({ path, clock, sandboxd });
    await first.p.createPod(p);
    const held = readTable(path).claims["default/a"].id as string;
    const stray = await crashAfterClaim(sandboxd, p);

    const h = await harness({ path, clock, sandboxd });
    const table = readTable(path);
    expect(table.claims["default/a"].id).toBe(held);
    expect(table.releasing.map((r: { id: string; token: string }) => [r.id, r.token])).toEqual([[stray.id, stray.token]]);

    let onDisk: string[] = [];
    sandboxd.onRelease = () => (onDisk = existsSync(path) ? (readTable(path).releasing ?? []).map((r: { id: string }) => r.id) : []);
    await h.impl.tick("owner-recheck");
    expect(onDisk).toEqual([stray.id]);
    expect(sandboxd.released).toEqual([stray.id]);
    expect(sandboxd.ids()).toEqual([held]);
    expect(readTable(path).releasing).toBeUndefined();
    await h.p.createPod(p);
    expect(claimIdOf(h.pushes.at(-1))).toBe(held);
  });

  test("a verification pass never records a claim whose create is between its claim call and its row", async () => {
    const { clock, sandboxd, path } = await setup();
    const p = pod({ name: "a" });
    const h = await harness({ path, clock, sandboxd });
    const reply = await crashAfterClaim(sandboxd, p);
    const { st } = h.impl.core;
    st.claiming.add("default/a");
    expect(await h.impl.verifier.verifyOnce()).toBe(true);
    expect(st.claims.has("default/a")).toBe(false);
    expect(h.impl.verifier.claimAllowed("default/a")).toBe(false);
    expect(h.impl.verifier.finished).toBe(false);
    st.claiming.delete("default/a");
    await h.impl.verifier.verifyOnce();
    expect(st.claims.get("default/a")?.id).toBe(reply.id);
    expect(h.impl.verifier.finished).toBe(true);
  });
});
