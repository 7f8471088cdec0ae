// A sandbox its owner node answered 404 for stays gone on this surface: a fleet view that still lists it (a listing
// taken before the reap and applied after the read) must not make the next get or kill find it again, as the stock
// SDK's getInfo then kill of a reaped sandbox showed (getInfo: not found; kill: true).
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/fake.ts";
import { LiveLookup, type LookupNodes } from "#shared/e2b/lookup.ts";
import { OwnWrites, OWN_WRITE_MS } from "#shared/e2b/own-writes.ts";
import { SandboxdNotFound, SandboxdServerError } from "#shared/sandboxd/errors.ts";

const located = { claimId: "sb_0123456789abcdef", publicId: "sb-0123456789abcdef", address: "http://10.0.0.5:7777", nodeName: "n1" };

function nodesAnswering(err: Error): LookupNodes {
  return {
    locate: async () => located,
    client: () => ({ get: async () => Promise.reject(err) }) as never,
    forget: () => undefined,
  };
}

describe("LiveLookup: a node's 404", () => {
  test("marks the sandbox killed on this surface, so get and kill answer not found while the view lags", async () => {
    const clock = new FakeClock();
    const own = new OwnWrites(clock);
    const lookup = new LiveLookup(nodesAnswering(new SandboxdNotFound("unknown sandbox", { node: "10.0.0.5:7777", route: "GET /v1/sandboxes/:id", status: 404 })), (ns, id) => own.killed(ns, id));
    await expect(lookup.read("team-a", located.publicId, "failed to read the sandbox")).rejects.toThrow(`sandbox "${located.publicId}" not found`);
    expect(own.isKilled("team-a", located.publicId)).toBe(true);
    expect(own.isKilled("team-b", located.publicId)).toBe(false);
    clock.advance(OWN_WRITE_MS + 1);
    expect(own.isKilled("team-a", located.publicId)).toBe(false);
  });

  test("a node that fails otherwise (a 500) marks nothing", async () => {
    const own = new OwnWrites(new FakeClock());
    const lookup = new LiveLookup(nodesAnswering(new SandboxdServerError("node failed", { node: "10.0.0.5:7777", route: "GET /v1/sandboxes/:id", status: 500 })), (ns, id) => own.killed(ns, id));
    await expect(lookup.read("team-a", located.publicId, "failed to read the sandbox")).rejects.toThrow();
    expect(own.isKilled("team-a", located.publicId)).toBe(false);
  });
});
