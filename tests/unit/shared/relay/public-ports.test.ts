// Which credential opens which port (shared/relay/public-ports.ts) and the create-side policy and token
// (shared/envd-token/traffic.ts): pure functions, every combination of port, presented credential, stamp and flags.
import { expect, test } from "bun:test";
import { credentialOf, servesPublicly } from "#shared/relay/index.ts";
import { decidePublicTraffic, publicTrafficStamp, trafficAccessToken, trafficTokenMatches } from "#shared/envd-token/index.ts";
import { envdAccessToken } from "#shared/e2b/tokens.ts";

const h = (o: Record<string, string>) => new Headers(o);
const url = (p: string) => new URL(`http://x${p}`);

test("envd's port: its access token or a signed file URL, never a traffic token, never nothing", () => {
  expect(credentialOf(49983, "GET", url("/files"), h({ "x-access-token": "t" }))).toEqual({ kind: "envd-token", token: "t" });
  expect(credentialOf(49983, "GET", url("/files?signature=s"), h({}))).toEqual({ kind: "signed-url" });
  expect(credentialOf(49983, "GET", url("/files"), h({ "e2b-traffic-access-token": "t" }))).toEqual({ kind: "none", envdPort: true });
});

test("a user port: the envd token wins, then the traffic header, else nothing (public or 401); a signature is no credential", () => {
  expect(credentialOf(3000, "GET", url("/"), h({ "x-access-token": "a", "e2b-traffic-access-token": "b" }))).toEqual({ kind: "envd-token", token: "a" });
  expect(credentialOf(3000, "GET", url("/"), h({ "E2B-Traffic-Access-Token": " b " }))).toEqual({ kind: "traffic-token", token: "b" });
  expect(credentialOf(3000, "GET", url("/files?signature=s"), h({}))).toEqual({ kind: "none", envdPort: false });
});

test("servesPublicly: only the public stamp; a claim without one is private whatever the default; forbid overrides", () => {
  const policy = (defaultPublic: boolean, forbid: boolean) => ({ defaultPublic, forbid });
  expect(servesPublicly({ publicTraffic: true }, policy(false, false))).toBe(true);
  expect(servesPublicly({ publicTraffic: false }, policy(true, false))).toBe(false);
  // Issue 27: an unstamped claim (a Kubernetes-created Sandbox) never takes the e2b create default.
  expect(servesPublicly({}, policy(true, false))).toBe(false);
  expect(servesPublicly({}, policy(false, false))).toBe(false);
  expect(servesPublicly({ publicTraffic: true }, policy(true, true))).toBe(false);
  expect(servesPublicly({})).toBe(false);
  expect(servesPublicly({ publicTraffic: true })).toBe(true);
});

test("decidePublicTraffic: the create's field, else the default; forbid refuses an explicit true and names the flag", () => {
  const cloud = { defaultPublic: true, forbid: false };
  expect(decidePublicTraffic(undefined, cloud)).toEqual({ public: true });
  expect(decidePublicTraffic(false, cloud)).toEqual({ public: false });
  expect(decidePublicTraffic(undefined, { defaultPublic: false, forbid: false })).toEqual({ public: false });
  expect(decidePublicTraffic(true, { defaultPublic: false, forbid: false })).toEqual({ public: true });
  expect(decidePublicTraffic(undefined, { defaultPublic: true, forbid: true })).toEqual({ public: false });
  expect(decidePublicTraffic(true, { defaultPublic: true, forbid: true })).toMatchObject({ refused: expect.stringContaining("--forbid-public-traffic") });
});

test("the traffic token: 64 hex digits from the secret and the claim token, not the envd token, checked offline", () => {
  const t = trafficAccessToken("secret", "claim-token");
  expect(t).toMatch(/^[0-9a-f]{64}$/);
  expect(t).toBe(trafficAccessToken("secret", "claim-token"));
  expect(t).not.toBe(trafficAccessToken("other", "claim-token"));
  expect(envdAccessToken("secret", "sb_0123456789abcdef", "claim-token")).not.toContain(t);
  expect(trafficTokenMatches("secret", "claim-token", t)).toBe(true);
  expect(trafficTokenMatches("secret", "claim-token", "0".repeat(64))).toBe(false);
  expect(publicTrafficStamp({ "vk-sandbox.public-traffic": "false" })).toBe(false);
  expect(publicTrafficStamp({ "vk-sandbox.public-traffic": "yes" })).toBeUndefined();
  expect(publicTrafficStamp(undefined)).toBeUndefined();
});
