import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ClaimsFile, ClaimsStore } from "#services/vk-sandbox/claims/index.ts";
import type { Claim } from "#services/vk-sandbox/claims/schema.ts";
import { ProviderState } from "#services/vk-sandbox/provider/state.ts";
import { readTable, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();
const claim = (id: string): Claim => ({ id, token: `t-${id}`, address: "", podUID: "", authority: "", claimedAt: 1_000, deadline: 0 });

function state() {
  const path = join(tmp(), "claims.json");
  return { st: new ProviderState(new ClaimsStore(new ClaimsFile({ path }))), read: () => readTable(path) };
}

describe("provider state writes", () => {
  test("a row committed by one write stays in the next write, which starts before its creator resumes", async () => {
    const { st, read } = state();
    st.claims.set("ns/a", claim("a"));
    st.tentative.add("ns/a");
    const a = st.commitRow("a");
    await Promise.resolve();
    await Promise.resolve();
    st.claims.set("ns/b", claim("b"));
    st.tentative.add("ns/b");
    const b = st.commitRow("b");
    await Promise.all([a, b]);
    expect(Object.keys(read().claims).sort()).toEqual(["ns/a", "ns/b"]);
    expect(st.tentative.size).toBe(0);
  });

  test("another writer's snapshot leaves out tentative rows", async () => {
    const { st, read } = state();
    st.claims.set("ns/settled", claim("s"));
    st.claims.set("ns/stranded", claim("x"));
    st.tentative.add("ns/stranded");
    await st.save();
    expect(Object.keys(read().claims)).toEqual(["ns/settled"]);
    expect(st.tentative.has("ns/stranded")).toBe(true);
  });

  test("releasing entries become durable only once a write containing them landed", async () => {
    const { st, read } = state();
    st.claims.set("ns/a", claim("a"));
    expect(st.moveToReleasing("ns/a", "a")).toBe(true);
    expect(st.releasing[0]!.durable).toBe(false);
    await st.save();
    expect(st.releasing[0]!.durable).toBe(true);
    expect(read()).toEqual({ claims: {}, releasing: [{ id: "a", token: "t-a", podUID: "", claimedAt: "1970-01-01T00:00:01Z" }] });
  });

  test("ID-guarded changes do nothing once the key holds another claim", () => {
    const { st } = state();
    st.claims.set("ns/a", claim("new"));
    expect(st.update("ns/a", "old", (c) => ({ ...c, deadline: 5 }))).toBe(false);
    expect(st.drop("ns/a", "old")).toBe(false);
    expect(st.moveToReleasing("ns/a", "old")).toBe(false);
    expect(st.claims.get("ns/a")?.deadline).toBe(0);
  });
});
