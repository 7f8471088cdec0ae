// services/sandboxd-sim/preview.ts: the lifetime rule (default hour, clamped to the lease, unclamped without one)
// and the signed token (reads back with the minting key only; a tampered payload is refused).
import { describe, expect, test } from "bun:test";
import { mintPreviewUrl, previewExpiry, readPreviewUrl } from "#services/sandboxd-sim/preview.ts";
import { parseFlags } from "#services/sandboxd-sim/main.ts";

const NOW = Date.UTC(2026, 6, 6, 0, 0, 0);

describe("preview lifetime", () => {
  test("ttl ≤ 0 or absent asks for an hour; a lease clamps it; no lease leaves it; whole seconds, rounded down", () => {
    const leased = { deadline: NOW + 600_000 };
    expect(previewExpiry(NOW, leased, 60)).toBe(NOW + 60_000);
    expect(previewExpiry(NOW, leased, 0)).toBe(NOW + 600_000);
    expect(previewExpiry(NOW, leased, undefined)).toBe(NOW + 600_000);
    expect(previewExpiry(NOW, { deadline: NOW + 7_200_000 }, -5)).toBe(NOW + 3_600_000);
    expect(previewExpiry(NOW, { deadline: null }, 86_400)).toBe(NOW + 86_400_000);
    expect(previewExpiry(NOW, { deadline: NOW + 1_999 }, 60)).toBe(NOW + 1_000);
  });
});

describe("preview token", () => {
  const grant = { sandboxId: "sb_0123456789abcdef", port: 8080, owner: "10.0.0.5:7777", expiresAt: NOW + 60_000 };

  test("reads back with the minting key; another key, a tampered payload or a foreign path read as null", () => {
    const url = mintPreviewUrl("k1", "10.0.0.5:7778", grant);
    expect(url).toMatch(/^http:\/\/10\.0\.0\.5:7778\/p\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\/$/);
    expect(readPreviewUrl("k1", url)).toEqual(grant);
    expect(readPreviewUrl("k2", url)).toBeNull();
    const [payload, sig] = url.split("/p/")[1]!.replace(/\/$/, "").split(".");
    const forged = Buffer.from(JSON.stringify({ sb: grant.sandboxId, port: 22, owner: grant.owner, exp: 9e9 })).toString("base64url");
    expect(readPreviewUrl("k1", url.replace(payload!, forged))).toBeNull();
    expect(readPreviewUrl("k1", `http://x/q/${payload}.${sig}/`)).toBeNull();
  });

  test("an advertise value with a scheme is used as the origin", () => {
    expect(mintPreviewUrl("k", "https://preview.example.com/", grant).startsWith("https://preview.example.com/p/")).toBe(true);
  });
});

describe("--preview-advertise", () => {
  test("absent keeps the default, a value names the listener, an empty value means no listener", () => {
    const cfg = (argv: string[]) => parseFlags(argv) as Exclude<ReturnType<typeof parseFlags>, "help" | "version">;
    expect(cfg([]).previewAdvertise).toBeUndefined();
    expect(cfg(["--preview-advertise", "10.0.0.5:7778"]).previewAdvertise).toBe("10.0.0.5:7778");
    expect(cfg(["--preview-advertise", ""]).previewAdvertise).toBeNull();
  });
});
