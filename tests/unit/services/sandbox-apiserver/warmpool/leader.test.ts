// Leader election on a Lease kept by an in-memory stand-in for the Lease API (GET, POST, PUT with resourceVersion
// conflicts), on a FakeClock. What matters: one holder at a time, expiry judged on our own clock from when the record
// last changed (a holder whose clock is far behind or ahead cannot make us wait forever or take over early), and a
// leader that cannot renew for the renew deadline steps down.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { KubeClient } from "#shared/kube/client.ts";
import { createLogger } from "#shared/log/index.ts";
import type { InvolvedObject } from "#shared/kube/index.ts";
import { LeaderElector } from "#services/sandbox-apiserver/warmpool/leader.ts";

interface LeaseObj {
  metadata: { name: string; namespace: string; resourceVersion: string };
  spec: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number };
}

function leaseApi() {
  let lease: LeaseObj | undefined;
  let rv = 0;
  let down = false;
  /** Runs while a GET is in flight, before it answers (a slow read; a write landing meanwhile). */
  let duringGet: (() => Promise<void>) | undefined;
  const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
  const transport = async (_url: string, init: { method: string; body?: string }) => {
    if (down) return json(503, { kind: "Status", code: 503, reason: "ServiceUnavailable" });
    if (init.method === "GET" && duringGet) await duringGet();
    if (init.method === "GET") return lease ? json(200, lease) : json(404, { kind: "Status", code: 404, reason: "NotFound" });
    const obj = JSON.parse(init.body!) as LeaseObj;
    if (init.method === "POST") {
      if (lease) return json(409, { kind: "Status", code: 409, reason: "AlreadyExists" });
      lease = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(++rv) } };
      return json(201, lease);
    }
    if (!lease || obj.metadata.resourceVersion !== lease.metadata.resourceVersion) return json(409, { kind: "Status", code: 409, reason: "Conflict" });
    lease = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(++rv) } };
    return json(200, lease);
  };
  return {
    client: new KubeClient({ server: "http://lease.test" }, { transport }),
    holder: () => lease?.spec.holderIdentity,
    /** Another process writes the lease (with its own clock's renewTime). */
    setHolder: (h: string, renewTime: string) => {
      lease = { metadata: { name: "cocoon-warmpool-driver", namespace: "ns", resourceVersion: String(++rv) }, spec: { holderIdentity: h, renewTime, leaseDurationSeconds: 15 } };
    },
    setDown: (d: boolean) => (down = d),
    setDuringGet: (f: (() => Promise<void>) | undefined) => (duringGet = f),
  };
}

const log = createLogger({ level: "error", name: "test" });

describe("leader election", () => {
  test("the first candidate creates the Lease; a second waits while the holder renews", async () => {
    const api = leaseApi();
    const clock = new FakeClock();
    const a = new LeaderElector({ client: api.client, namespace: "ns", identity: "a", clock, log });
    const b = new LeaderElector({ client: api.client, namespace: "ns", identity: "b", clock, log });
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(await b.tryAcquireOrRenew()).toBe(false);
    for (let i = 0; i < 10; i++) {
      await clock.tick(2000);
      expect(await a.tryAcquireOrRenew()).toBe(true);
      expect(await b.tryAcquireOrRenew()).toBe(false);
    }
    expect(api.holder()).toBe("a");
  });

  test("a holder that stops renewing is taken over once the lease duration passed on our clock, whatever its renewTime says", async () => {
    const api = leaseApi();
    const clock = new FakeClock();
    // The dead holder's clock ran an hour ahead: comparing its renewTime with our clock would wait an hour.
    api.setHolder("dead", new Date(clock.now() + 3_600_000).toISOString());
    const b = new LeaderElector({ client: api.client, namespace: "ns", identity: "b", clock, log });
    expect(await b.tryAcquireOrRenew()).toBe(false); // first sight of the record starts our own timer
    await clock.tick(14_000);
    expect(await b.tryAcquireOrRenew()).toBe(false);
    await clock.tick(1_001);
    expect(await b.tryAcquireOrRenew()).toBe(true);
    expect(api.holder()).toBe("b");
  });

  test("a record read by a slow GET counts as seen when the answer came, not when the attempt began", async () => {
    const api = leaseApi();
    const clock = new FakeClock();
    api.setHolder("a", new Date(clock.now()).toISOString());
    const b = new LeaderElector({ client: api.client, namespace: "ns", identity: "b", clock, log });
    // The read takes 4 s on a loaded apiserver, and the holder's last renewal lands while it is in flight.
    api.setDuringGet(async () => {
      await clock.tick(4_000);
      api.setHolder("a", new Date(clock.now()).toISOString());
    });
    expect(await b.tryAcquireOrRenew()).toBe(false);
    api.setDuringGet(undefined);
    // 15 s after the attempt began is only 11 s after that renewal was seen: the holder may still be leading.
    await clock.tick(11_001);
    expect(await b.tryAcquireOrRenew()).toBe(false);
    await clock.tick(4_000);
    expect(await b.tryAcquireOrRenew()).toBe(true);
    expect(api.holder()).toBe("b");
  });

  test("a leader that cannot renew for the renew deadline stops leading; a released lease is free at once", async () => {
    const api = leaseApi();
    const clock = new FakeClock();
    const recorded: { kind?: string; name?: string; reason: string; message: string }[] = [];
    const events = { normal: (o: InvolvedObject, reason: string, message: string) => recorded.push({ kind: o.kind, name: o.metadata?.name, reason, message }) };
    const a = new LeaderElector({ client: api.client, namespace: "ns", identity: "a", clock, log, events });
    const stop = new AbortController();
    let leading = false;
    let ended = false;
    const run = a.run(stop.signal, async (signal) => {
      leading = true;
      await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
      leading = false;
      ended = true;
    });
    await clock.tick(0);
    expect(leading).toBe(true);
    api.setDown(true);
    for (let t = 0; t < 8_000; t += 2_000) await clock.tick(2_000);
    expect(leading).toBe(true); // 8 s without a renewal: still inside the 10 s deadline
    for (let t = 0; t < 4_000; t += 2_000) await clock.tick(2_000);
    expect(ended).toBe(true);
    await run;
    // client-go's LeaseLock events: one on winning, one on losing, both on the Lease.
    expect(recorded).toEqual([
      { kind: "Lease", name: "cocoon-warmpool-driver", reason: "LeaderElection", message: "a became leader" },
      { kind: "Lease", name: "cocoon-warmpool-driver", reason: "LeaderElection", message: "a stopped leading" },
    ]);
    api.setDown(false);
    const b = new LeaderElector({ client: api.client, namespace: "ns", identity: "b", clock, log });
    await a.release(); // a no longer holds it in its own view, but the record still names it
    expect(await b.tryAcquireOrRenew()).toBe(true);
    stop.abort();
  });
});
