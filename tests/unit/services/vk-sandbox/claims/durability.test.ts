// Durability as a user of the claims table relies on it: a write the disk refuses (ENOSPC, at write or at fsync)
// is a failed commit, so the create that needed it fails and gives its sandbox back instead of reporting Running
// with a claim that would be lost on restart; and a releasing entry queued while a write is in flight is not
// marked durable by that write (its snapshot predates the entry), so its release waits for a write that holds it.
import { describe, expect, test } from "bun:test";
import { closeSync, existsSync, fchmodSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, unlinkSync, writeFileSync, writevSync } from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { ClaimsFile, ClaimsStateError, ClaimsStore, type Claim } from "#services/vk-sandbox/claims/index.ts";
import type { ClaimsFs } from "#services/vk-sandbox/claims/file.ts";
import { ProviderState } from "#services/vk-sandbox/provider/state.ts";
import { VkSandboxMetrics } from "#services/vk-sandbox/metrics.ts";
import { bare, gate, harness, readTable, scratchDirs } from "../provider/helpers.ts";

const tmp = scratchDirs();

function enospc(call: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ENOSPC: no space left on device, ${call}`), { code: "ENOSPC", errno: -28, syscall: call });
}

/** node:fs with a disk that can fill up (at the data write or at the fsync) and an fsync a test can hold. */
function disk() {
  const d = {
    fullAt: undefined as "write" | "fsync" | undefined,
    holdFsync: undefined as Promise<void> | undefined,
    fs: undefined as unknown as ClaimsFs,
  };
  d.fs = {
    readFile: (p, e) => fsp.readFile(p, e),
    mkdirSync: (p, o) => mkdirSync(p, o),
    openSync: (p, flags, mode) => openSync(p, flags, mode),
    fchmodSync: (fd, m) => fchmodSync(fd, m),
    writeFileSync: (fd, data) => {
      if (d.fullAt === "write") throw enospc("write");
      writeFileSync(fd, data);
    },
    writevSync: (fd, parts, pos) => {
      if (d.fullAt === "write") throw enospc("writev");
      return writevSync(fd, parts as Uint8Array[], pos);
    },
    fsync: async (fd) => {
      if (d.holdFsync) await d.holdFsync;
      if (d.fullAt === "fsync") throw enospc("fsync");
      fsyncSync(fd);
    },
    closeSync: (fd) => closeSync(fd),
    renameSync: (a, b) => renameSync(a, b),
    unlinkSync: (p) => unlinkSync(p),
  };
  return d;
}

describe("a claims write the disk refuses (ENOSPC)", () => {
  for (const at of ["write", "fsync"] as const) {
    test(`at ${at}: the file write rejects with a state error naming ENOSPC, and the old table stands`, async () => {
      const path = join(tmp(), "claims.json");
      const d = disk();
      const f = new ClaimsFile({ path, fs: d.fs });
      await f.write('{"claims":{}}');
      d.fullAt = at;
      const err = await f.write([Buffer.from('{"claims":{"ns/a":{"id":"sb_1","token":"t","podUID":""}}}')]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ClaimsStateError);
      expect((err as ClaimsStateError).code).toBe("unwritable");
      expect((err as Error).message).toContain("ENOSPC");
      expect(readFileSync(path, "utf8")).toBe('{"claims":{}}');
      expect(existsSync(`${path}.tmp`)).toBe(false);
    });

    test(`at ${at}: the create fails, its claim is not acknowledged (no Running, no row) and the sandbox is released`, async () => {
      const path = join(tmp(), "claims.json");
      const d = disk();
      const h = await harness({ path, fs: d.fs });
      d.fullAt = at;
      const err = await h.p.createPod(bare()).then(
        () => undefined,
        (e: unknown) => e as { code?: string; message?: string },
      );
      expect(err?.code).toBe("state-write-failed");
      expect(err?.message).toContain("ENOSPC");
      expect(h.pushes.filter((p) => p.status?.phase === "Running")).toHaveLength(0);
      expect(h.p.getPod("default", "sb1")).toBeUndefined();
      expect(h.sandboxd.claimCalls.n).toBe(1);
      expect(h.sandboxd.released).toHaveLength(1);
      expect(h.sandboxd.ids()).toEqual([]);
      expect(readTable(path)).toEqual({ claims: {} });

      // The disk has room again: the controller's retry claims and is acknowledged.
      d.fullAt = undefined;
      await h.p.createPod(bare());
      expect(h.pushes.at(-1)?.status?.phase).toBe("Running");
      expect(Object.keys(readTable(path).claims)).toEqual(["default/sb1"]);
    });
  }
});

describe("an operator sees the refused write", () => {
  test("the timed claims file counts it under outcome error (not ok) and adds no bytes", async () => {
    const path = join(tmp(), "claims.json");
    const d = disk();
    const m = new VkSandboxMetrics();
    const f = m.claimsFile(new ClaimsFile({ path, fs: d.fs }));
    await f.write('{"claims":{}}');
    d.fullAt = "fsync";
    await expect(f.write('{"claims":{"ns/a":{"id":"sb_1","token":"t","podUID":""}}}')).rejects.toThrow("ENOSPC");
    const text = (await m.exposition()).body;
    expect(text).toContain('vk_sandbox_state_write_seconds_count{outcome="ok"} 1');
    expect(text).toContain('vk_sandbox_state_write_seconds_count{outcome="error"} 1');
    expect(text).toContain(`vk_sandbox_state_write_bytes_total ${'{"claims":{}}'.length}`);
  });
});

describe("releasing entries and the write in flight", () => {
  const claim = (id: string): Claim => ({ id, token: `t-${id}`, address: "", podUID: "", authority: "", claimedAt: 1_000, deadline: 0 });

  test("an entry queued while a write is in flight is not marked durable by it; the next write makes it durable", async () => {
    const path = join(tmp(), "claims.json");
    const d = disk();
    const st = new ProviderState(new ClaimsStore(new ClaimsFile({ path, fs: d.fs })));
    st.claims.set("ns/a", claim("a"));
    st.claims.set("ns/b", claim("b"));
    st.moveToReleasing("ns/a", "a");
    const hold = gate();
    d.holdFsync = hold.promise;
    const first = st.save();
    // Let the batch start: its snapshot (a on the releasing list, b still a row) is taken now.
    while (st.writes === 0) await Promise.resolve();
    st.moveToReleasing("ns/b", "b");
    d.holdFsync = undefined;
    hold.open();
    await first;
    const entry = (id: string) => st.releasing.find((e) => e.claim.id === id)!;
    expect(readTable(path)).toMatchObject({ claims: { "ns/b": { id: "b" } }, releasing: [{ id: "a" }] });
    expect(entry("a").durable).toBe(true);
    expect(entry("b").durable).toBe(false);
    await st.save();
    expect(readTable(path).releasing.map((r: { id: string }) => r.id)).toEqual(["a", "b"]);
    expect(entry("b").durable).toBe(true);
  });
});
