// The lane-tagged envd access token (shared/e2b/tokens.ts) against known answers, so swapping HMAC key and message,
// the label, the order of the parts or the tag's length fails; and what the relay accepts.
import { describe, expect, test } from "bun:test";
import { accessTokenMatches, carriesLaneTag, deriveAccessToken, envdAccessToken, laneTag } from "#shared/e2b/tokens.ts";

const SECRET = "envd-secret";
const ID = "sb_0123456789abcdef";
const CLAIM = "claim-token";
// Computed once with `openssl dgst -sha256 -hmac`: printf 'e2b-lane\0sb_0123456789abcdef' and printf 'claim-token'.
const TAG = "97248e6106d83921f2581919bb28d53b";
const MAC = "9c2ba037d81b775edf6c2baf656d3e59f35439d58f37eba8214fd171c450255e";

describe("lane-tagged access tokens", () => {
  test("known answer: tag = first 32 hex of HMAC(secret, 'e2b-lane\\0' + id), then HMAC(secret, claim token)", () => {
    expect(laneTag(SECRET, ID)).toBe(TAG);
    expect(deriveAccessToken(SECRET, CLAIM)).toBe(MAC);
    expect(envdAccessToken(SECRET, ID, CLAIM)).toBe(TAG + MAC);
  });

  test("the tag verifies only for its id and secret; the relay accepts the tagged form and the bare one of old sandboxes", () => {
    const token = envdAccessToken(SECRET, ID, CLAIM);
    expect(carriesLaneTag(SECRET, ID, token)).toBe(true);
    expect(carriesLaneTag(SECRET, "sb_0123456789abcdee", token)).toBe(false);
    expect(carriesLaneTag("other", ID, token)).toBe(false);
    expect(carriesLaneTag(SECRET, ID, MAC)).toBe(false);
    expect(accessTokenMatches(SECRET, ID, CLAIM, token)).toBe(true);
    expect(accessTokenMatches(SECRET, ID, CLAIM, MAC)).toBe(true);
    // A right tag with another claim's HMAC, or another id's tag with the right HMAC: refused.
    expect(accessTokenMatches(SECRET, ID, CLAIM, TAG + deriveAccessToken(SECRET, "other"))).toBe(false);
    expect(accessTokenMatches(SECRET, ID, CLAIM, laneTag(SECRET, "sb_ffffffffffffffff") + MAC)).toBe(false);
    expect(accessTokenMatches(SECRET, ID, CLAIM, "")).toBe(false);
  });
});
