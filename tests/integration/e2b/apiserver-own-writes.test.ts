// Issue 20 parts 2 and 4 on the kube stack: sandbox-apiserver --enable-e2b-api over a NodeInventory the test
// publishes itself (so the inventory lags every write until the test says otherwise), with the stock JS SDK 2.51.
// The replica that created, paused, resumed or killed a sandbox lists it that way at once; a second kill answers
// false at once; an Idempotency-Key retry returns the same sandbox on this replica at once, and on a second
// replica once the inventory carries the stamped claim's metadata (as vk-sandbox publishes it).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox, SandboxNotFoundError } from "e2b";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { freePorts } from "../../kube/ports.ts";
import { e2bServerArgs, publishSimNode, writeE2bFiles } from "#tests/support/e2b-apiserver.ts";
import { until } from "#tests/support/wait.ts";
import { startTestGuest, type TestGuest } from "./guest.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "../sandbox-apiserver/fixture.ts";

const ROOT = "root-e2b-own-writes";
const KEY = "e2b_3333333333333333333333333333333333333333";
let stack: Stack;
let sim: SandboxdSim;
let guest: TestGuest;
const servers: ApiserverProcess[] = [];

/** The inventory as vk-sandbox would publish it for the sim's node; `entries` as given (default: none). */
const publish = (entries: Record<string, unknown>[] = []) => publishSimNode(stack, sim, entries);

async function startE2b(): Promise<string> {
  const [port] = freePorts(1);
  servers.push(await stack.startServer({ args: e2bServerArgs({ rootToken: ROOT, port, dir: stack.dir }) }));
  return `http://127.0.0.1:${port}`;
}

beforeAll(async () => {
  stack = await startStack();
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img:1/none/small=4"] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  writeE2bFiles(stack.dir, `${KEY} team-rw\n`);
  await publish();
}, 60_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  await sim?.stop();
  await guest?.stop();
  await stack?.stop();
});

describe("sandbox-apiserver's e2b surface reads its own writes", () => {
  test("create, pause, resume, kill: the next list and get say so while the inventory shows none of it", async () => {
    const api = await startE2b();
    const opts = { apiKey: KEY, apiUrl: api, domain: "sb.test", requestTimeoutMs: 10_000 };
    const ids = async (state?: ("running" | "paused")[]) => (await Sandbox.list({ ...opts, ...(state ? { query: { state } } : {}) }).nextItems()).map((i) => i.sandboxId);
    const sbx = await Sandbox.create("base", { ...opts, metadata: { rw: "1" } });
    expect(await ids()).toEqual([sbx.sandboxId]);
    expect((await Sandbox.list({ ...opts, query: { template: "base", metadata: { rw: "1" } } }).nextItems()).map((i) => i.sandboxId)).toEqual([sbx.sandboxId]);
    expect(await Sandbox.pause(sbx.sandboxId, opts)).toBe(true);
    expect(await ids(["paused"])).toEqual([sbx.sandboxId]);
    expect((await Sandbox.getInfo(sbx.sandboxId, opts)).state).toBe("paused");
    await Sandbox.connect(sbx.sandboxId, opts);
    expect(await ids(["running"])).toEqual([sbx.sandboxId]);
    expect(await Sandbox.kill(sbx.sandboxId, opts)).toBe(true);
    expect(await ids()).toEqual([]);
    expect(await Sandbox.kill(sbx.sandboxId, opts)).toBe(false);
    expect(await Sandbox.getInfo(sbx.sandboxId, opts).catch((e: unknown) => e)).toBeInstanceOf(SandboxNotFoundError);
    expect(sim.claims()).toHaveLength(0);
  }, 60_000);

  test("Idempotency-Key: one sandbox on the node for two creates on this replica, and for a retry on another", async () => {
    const api = await startE2b();
    const post = (url: string) =>
      fetch(`${url}/v2/sandboxes`, { method: "POST", headers: { "x-api-key": KEY, "content-type": "application/json", "idempotency-key": "kube-1" }, body: JSON.stringify({ templateID: "base" }) });
    const [a, b] = await Promise.all([post(api), post(api)]);
    expect([a.status, b.status]).toEqual([201, 201]);
    const first = await a.json();
    expect((await b.json()).sandboxID).toBe(first.sandboxID);
    expect((await (await post(api)).json()).sandboxID).toBe(first.sandboxID);
    expect(sim.claims()).toHaveLength(1);
    // The inventory catches up, carrying the claim's metadata: a second replica finds the key there.
    const claim = sim.claims()[0]!;
    await publish([{ id: claim.id, name: claim.claimRef, claimRef: claim.claimRef, phase: "Running", template: "img:1", claimedAt: rfc3339(Date.now()), claimMetadata: JSON.stringify(claim.metadata ?? {}) }]);
    const other = await startE2b();
    const retried = await post(other);
    expect(retried.status).toBe(201);
    const again = await retried.json();
    expect(again.sandboxID).toBe(first.sandboxID);
    expect(again.envdAccessToken).toBe(first.envdAccessToken);
    expect(sim.claims()).toHaveLength(1);
    const opts = { apiKey: KEY, apiUrl: api, domain: "sb.test" };
    expect(await Sandbox.kill(first.sandboxID, opts)).toBe(true);
  }, 90_000);

  test('onTimeout "pause": getInfo says paused as soon as the node paused it, while the inventory still says Running; connect resumes it', async () => {
    const api = await startE2b();
    const opts = { apiKey: KEY, apiUrl: api, domain: "sb.test", requestTimeoutMs: 10_000 };
    const sbx = await Sandbox.create("base", { ...opts, timeoutMs: 1_000, lifecycle: { onTimeout: "pause", autoResume: true } });
    const claim = sim.claims().find((c) => c.id === sbx.sandboxId.replace(/^sb-/, "sb_"))!;
    expect(claim.onExpire).toBe("archive");
    await publish([{ id: claim.id, name: claim.claimRef, claimRef: claim.claimRef, phase: "Running", template: "img:1", claimedAt: rfc3339(Date.now()) }]);
    await until(() => (sim.reapNow(), sim.claims().find((c) => c.id === claim.id)?.state !== "running"), "the node to pause the sandbox at its timeout", 10_000, 50);
    expect((await Sandbox.getInfo(sbx.sandboxId, opts)).state).toBe("paused");
    const again = await Sandbox.connect(sbx.sandboxId, { ...opts, timeoutMs: 60_000 });
    expect((await again.getInfo()).state).toBe("running");
    expect(sim.claims().find((c) => c.id === claim.id)!.state).toBe("running");
    expect(await Sandbox.kill(sbx.sandboxId, opts)).toBe(true);
  }, 60_000);
});
