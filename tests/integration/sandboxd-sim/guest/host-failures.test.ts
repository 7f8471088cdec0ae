// A claim whose guest cannot be created (its directory unusable) must not take the simulator down: GuestHost.sync
// runs after every request and on the reap timer, where a throw is an uncaught error that ends the process. The
// failure is said once, the claim stays without a guest, and every other claim still gets one.
import { afterAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { GuestHost } from "#services/sandboxd-sim/guest/host.ts";
import type { Claim } from "#services/sandboxd-sim/claims.ts";

const host = new GuestHost({ isolation: "process" });
afterAll(() => host.stop());

const claim = (id: string) => ({ id, key: { template: "base", net: "none", size: "small" }, state: "running" }) as unknown as Claim;

test("a guest that cannot be created is skipped (not retried, no throw); the other claims get theirs", async () => {
  // A plain file where the sandbox's directory goes: creating its guest fails (ENOTDIR).
  writeFileSync(join(host.baseDir, "sb_broken"), "not a directory");
  expect(() => host.sync([claim("sb_broken"), claim("sb_fine")])).not.toThrow();
  expect(host.get("sb_broken")).toBeUndefined();
  expect(host.get("sb_fine")).toBeDefined();
  // The next syncs (every request, the reap tick) do not throw either.
  expect(() => host.sync([claim("sb_broken"), claim("sb_fine"), claim("sb_later")])).not.toThrow();
  expect(host.get("sb_later")).toBeDefined();
  await host.get("sb_fine")!.ready;
});
