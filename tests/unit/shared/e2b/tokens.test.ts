// The envd access token against a known answer (docs/e2b.md "Access tokens": lowercase hex of
// HMAC-SHA256(key = envd secret, message = claim token)). The expected values are literals, checked again with
// node:crypto in the test itself, so swapping key and message, another digest, or a memo keyed without the secret
// fails here rather than only against a real envd.
import { describe, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { accessTokenHash, deriveAccessToken, safeEqual } from "#shared/e2b/tokens.ts";

const SECRET = "envd-secret-known-answer";
const CLAIM_TOKEN = "claim-token-0123456789abcdef";
const EXPECTED = "b1420d0afb61fdf78d1dbac8eae2d3701da70113d32a30820f00ffb906f3365d";
/** HMAC with key and message swapped: what a swap would produce, and must not. */
const SWAPPED = "b2387b530af4c40aa3bffe760aa3713bf22d2827c51258c5150128b49b5924d2";
const OTHER_SECRET = "other-secret";
const EXPECTED_OTHER = "31490d40cd93073d163289c6241dba061c63767f7a5be589a5b554814eb13a81";

describe("envd access token", () => {
  test("is HMAC-SHA256 keyed by the envd secret over the claim token, lowercase hex (known answer)", () => {
    expect(createHmac("sha256", SECRET).update(CLAIM_TOKEN).digest("hex")).toBe(EXPECTED);
    expect(createHmac("sha256", CLAIM_TOKEN).update(SECRET).digest("hex")).toBe(SWAPPED);
    expect(deriveAccessToken(SECRET, CLAIM_TOKEN)).toBe(EXPECTED);
    expect(deriveAccessToken(SECRET, CLAIM_TOKEN)).not.toBe(SWAPPED);
  });

  test("depends on the secret even when the same claim token was derived before (the memo is keyed by both)", () => {
    expect(deriveAccessToken(SECRET, CLAIM_TOKEN)).toBe(EXPECTED);
    expect(createHmac("sha256", OTHER_SECRET).update(CLAIM_TOKEN).digest("hex")).toBe(EXPECTED_OTHER);
    expect(deriveAccessToken(OTHER_SECRET, CLAIM_TOKEN)).toBe(EXPECTED_OTHER);
    // And back: the second derivation did not overwrite the first secret's answer.
    expect(deriveAccessToken(SECRET, CLAIM_TOKEN)).toBe(EXPECTED);
  });

  test("a secret and claim token that concatenate alike still derive different tokens", () => {
    // A memo keyed by plain concatenation would return one for the other.
    expect(deriveAccessToken("ab", "c")).toBe(createHmac("sha256", "ab").update("c").digest("hex"));
    expect(deriveAccessToken("a", "bc")).toBe(createHmac("sha256", "a").update("bc").digest("hex"));
    expect(deriveAccessToken("ab", "c")).not.toBe(deriveAccessToken("a", "bc"));
  });

  test("the fork child's accessTokenHash is hex SHA-512 of the access token (known answer)", () => {
    const hash = "7963a98f10b5af934a57ceb2d03e282b8195e67d64f9f0a85f51ac77eb6905e2d539f871da397fe3c625e7367e0cedb95795b75d3a3361290066aaae8186bb44";
    expect(createHash("sha512").update(EXPECTED).digest("hex")).toBe(hash);
    expect(accessTokenHash(EXPECTED)).toBe(hash);
  });

  test("safeEqual compares the whole string", () => {
    expect(safeEqual(EXPECTED, EXPECTED)).toBe(true);
    expect(safeEqual(EXPECTED, `${EXPECTED.slice(0, -1)}0`)).toBe(false);
    expect(safeEqual(EXPECTED, EXPECTED.slice(0, -1))).toBe(false);
    expect(safeEqual("", EXPECTED)).toBe(false);
  });
});
