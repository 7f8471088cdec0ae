// The S3 store's per-namespace bounds (shared/e2b/uploads/s3-quota.ts) over an in-memory bucket and a fake clock:
// a link's reservation ends when it expires or a listing shows its object, the listing is reused for LIST_TTL_MS,
// concurrent requests cannot both take the last link, and eviction keeps archives a build read lately.
// tests/integration/uploads-s3/s3-quota.test.ts runs the same bounds against versitygw.
import { describe, expect, test } from "bun:test";
import { E2bError } from "#shared/e2b/errors.ts";
import { EVICT_MIN_AGE_MS } from "#shared/e2b/uploads/dir-quota.ts";
import { LIST_TTL_MS, S3Quota, type ListedObject } from "#shared/e2b/uploads/s3-quota.ts";

function bucket() {
  let now = 1_000_000_000;
  const objects = new Map<string, ListedObject>();
  let lists = 0;
  const removed: string[] = [];
  const calls = {
    list: async (ns: string, max: number) => (lists++, [...objects.values()].filter((o) => o.key.startsWith(`${ns}/`)).slice(0, max)),
    remove: async (key: string) => void (removed.push(key), objects.delete(key)),
  };
  const put = (key: string, size: number, ageMs = 0) => objects.set(key, { key, size, lastModifiedMs: now - ageMs });
  return { calls, put, removed, lists: () => lists, now: () => now, advance: (ms: number) => void (now += ms) };
}

const refusal = async (p: Promise<unknown>): Promise<E2bError> => {
  try {
    await p;
  } catch (e) {
    if (e instanceof E2bError) return e;
    throw e;
  }
  throw new Error("admitted");
};

describe("S3Quota", () => {
  test("a link reserves until it expires or a listing shows its object", async () => {
    const b = bucket();
    const q = new S3Quota({ nsBytes: 1000, nsArchives: 10, nsLinks: 1 }, 100, b.calls, b.now);
    await q.admitLink("a", "a/t/1", 60_000);
    expect((await refusal(q.admitLink("a", "a/t/2", 60_000))).message).toContain("1 upload links not used yet");
    b.advance(60_000);
    await q.admitLink("a", "a/t/2", 60_000);
    // Uploaded: the next listing (LIST_TTL_MS on) shows it and frees the link.
    b.put("a/t/2", 5);
    b.advance(LIST_TTL_MS);
    await q.admitLink("a", "a/t/3", 60_000);
  });

  test("two requests at once cannot both take the last link; the listing is shared while fresh", async () => {
    const b = bucket();
    const q = new S3Quota({ nsBytes: 1000, nsArchives: 10, nsLinks: 1 }, 100, b.calls, b.now);
    const both = await Promise.allSettled([q.admitLink("a", "a/t/1", 60_000), q.admitLink("a", "a/t/2", 60_000)]);
    expect(both.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect(b.lists()).toBeLessThanOrEqual(2);
    await refusal(q.admitLink("a", "a/t/3", 60_000));
    expect(b.lists()).toBeLessThanOrEqual(2);
  });

  test("bytes: each link reserves upload-max; objects over upload-max are deleted by the listing and not counted", async () => {
    const b = bucket();
    b.put("a/t/big", 5000);
    b.put("a/t/small", 50);
    const q = new S3Quota({ nsBytes: 250, nsArchives: 10, nsLinks: 10 }, 100, b.calls, b.now);
    await q.admitLink("a", "a/t/1", 60_000);
    expect(b.removed).toEqual(["a/t/big"]);
    await q.admitLink("a", "a/t/2", 60_000);
    // 50 stored + 3 x 100 reserved > 250.
    const e = await refusal(q.admitLink("a", "a/t/3", 60_000));
    expect(e.status).toBe(429);
    expect(e.message).toContain("at most 250 bytes");
  });

  test("eviction: the namespace's own oldest go, never one younger than the floor, nor one a build read lately", async () => {
    const b = bucket();
    b.put("a/t/old-read", 1, EVICT_MIN_AGE_MS + 3);
    b.put("a/t/old", 1, EVICT_MIN_AGE_MS + 2);
    b.put("a/t/new", 1, 0);
    b.put("b/t/older", 1, EVICT_MIN_AGE_MS + 9);
    const q = new S3Quota({ nsBytes: 1000, nsArchives: 3, nsLinks: 10 }, 100, b.calls, b.now);
    q.read("a", "a/t/old-read");
    await q.admitLink("a", "a/t/1", 60_000);
    expect(b.removed).toEqual(["a/t/old"]);
    // Full again with recent archives only: refused, nothing more removed.
    await refusal(q.admitLink("a", "a/t/2", 60_000));
    expect(b.removed).toEqual(["a/t/old"]);
  });
});
