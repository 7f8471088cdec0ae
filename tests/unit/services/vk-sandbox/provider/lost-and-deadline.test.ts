// Two lease-watch rules a user relies on: a row without a deadline (0: archived forever, or a sandboxd that set
// none) is never past it, and a sandbox is reported lost only after consecutive listings lack it: one missing
// listing, then a listing that shows it again, starts the count afresh.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { SandboxRow } from "#shared/sandboxd/schemas.ts";
import { FakeClock, harness, makeSandboxd, pod, scratchDirs, type SandboxdDouble } from "./helpers.ts";

const tmp = scratchDirs();

/** The node's listing without the ids in `hidden` (a sandbox that drops out of one listing and comes back). */
function withHiddenRows(d: SandboxdDouble, hidden: Set<string>): SandboxdDouble {
  return new Proxy(d, {
    get(target, prop) {
      if (prop === "list") return async (): Promise<SandboxRow[]> => (await target.list()).filter((r) => !hidden.has(r.id));
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

async function running(ttl: string) {
  const clock = new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
  const hidden = new Set<string>();
  const real = await makeSandboxd(clock);
  const h = await harness({ path: join(tmp(), "claims.json"), clock, sandboxd: withHiddenRows(real, hidden) });
  await h.p.createPod(pod({ annotations: { "sandbox.cocoonstack.io/ttl-seconds": ttl } }));
  const id = real.ids()[0]!;
  return { h, clock, id, hidden, real };
}

describe("lost sandboxes: misses must be consecutive", () => {
  test("missing, listed, missing, listed ... never reaches two in a row: the Pod stays Running and keeps its row", async () => {
    const { h, id, hidden } = await running("3600");
    const pushes = h.pushes.length;
    for (let i = 0; i < 4; i++) {
      hidden.add(id);
      await h.impl.tick("lease-watch");
      hidden.delete(id);
      await h.impl.tick("lease-watch");
    }
    expect(h.pushes.length).toBe(pushes);
    expect(h.p.getPodStatus("default", "sb1")?.phase).toBe("Running");
    expect(h.impl.core.st.claims.get("default/sb1")?.id).toBe(id);
    // Two in a row do count.
    hidden.add(id);
    await h.impl.tick("lease-watch");
    await h.impl.tick("lease-watch");
    expect(h.pushes.at(-1)?.status?.reason).toBe("SandboxLost");
  });
});

describe("a deadline of 0 means none", () => {
  test("a row without a deadline is Running at any time, and the lease watch never reports it expired", async () => {
    const { h, clock, id, real } = await running("60");
    // The node keeps the sandbox well beyond the test; the row (as a table from an archive-forever claim) has none.
    real.setDeadline(id, clock.now() + 30 * 86_400_000);
    expect(h.impl.core.st.update("default/sb1", id, (c) => ({ ...c, deadline: 0 }))).toBe(true);
    clock.advance(2 * 3_600_000);
    expect(h.p.getPodStatus("default", "sb1")?.phase).toBe("Running");
    const pushes = h.pushes.length;
    await h.impl.tick("lease-watch");
    expect(h.pushes.length).toBe(pushes);
    expect(h.impl.core.st.claims.get("default/sb1")?.deadline).toBe(0);
  });
});
