import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { bare, harness, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();
const setup = () => harness({ path: join(tmp(), "claims.json") });
const audits = (lines: Array<Record<string, unknown>>) => lines.filter((l) => typeof l.verdict === "string");

describe("orphan audit", () => {
  test("an unclaimed sandbox without claim_ref is logged once as orphan and never released", async () => {
    const h = await setup();
    const id = await h.sandboxd.addForeign();
    await h.impl.tick("orphan-scan");
    await h.impl.tick("orphan-scan");
    expect(audits(h.lines)).toEqual([expect.objectContaining({ sandboxId: id, verdict: "orphan" })]);
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(h.sandboxd.has(id)).toBe(true);
  });

  test("an unclaimed sandbox with claim_ref is external", async () => {
    const h = await setup();
    const id = await h.sandboxd.addForeign("other/x");
    await h.impl.tick("orphan-scan");
    expect(audits(h.lines)).toEqual([expect.objectContaining({ sandboxId: id, verdict: "external", claimRef: "other/x" })]);
  });

  test("a row whose sandbox is unlisted is stale, and the row is not touched", async () => {
    const h = await setup();
    await h.p.createPod(bare());
    const id = h.sandboxd.ids()[0]!;
    h.sandboxd.vanish(id);
    await h.impl.tick("orphan-scan");
    expect(audits(h.lines)).toEqual([expect.objectContaining({ sandboxId: id, verdict: "stale", pod: "default/sb1" })]);
    expect(h.impl.core.st.claims.get("default/sb1")?.id).toBe(id);
  });

  test("a failed listing skips the cycle instead of reading everything as stale", async () => {
    const h = await setup();
    await h.p.createPod(bare());
    h.sandboxd.failLists(true);
    await h.impl.tick("orphan-scan");
    expect(audits(h.lines)).toEqual([]);
    expect(h.impl.core.st.orphanVerdicts.size).toBe(0);
  });

  test("held and releasing claims are not orphans", async () => {
    const h = await setup();
    await h.p.createPod(bare());
    await h.impl.tick("orphan-scan");
    expect(audits(h.lines)).toEqual([]);
  });
});
