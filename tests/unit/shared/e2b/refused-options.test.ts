// Request fields served or refused by name (issue 30 items 4 and 5; docs/e2b.md "Create options not offered"): the
// strict bodies name an unknown field (nested ones by path, a flood of them bounded), and each refused create option
// and network-update field is named with its reason; the SDK-facing end is tests/e2e/errors/request-fields.test.ts.
import { expect, test } from "bun:test";
import { readJsonBody } from "#shared/e2b/body.ts";
import type { E2bError } from "#shared/e2b/errors.ts";
import { EGRESS_POLICY, createOptionRefusal, networkUpdateRefusal } from "#shared/e2b/refused-options.ts";
import { NewSandbox, PauseBody } from "#shared/e2b/schemas.ts";

const post = (body: unknown) => new Request("http://e2b/v2/sandboxes", { method: "POST", body: JSON.stringify(body) });
const refusal = async (p: Promise<unknown>) => {
  const e = (await p.catch((x: unknown) => x)) as E2bError;
  return [e.status, e.message];
};

test("a strict body names an unknown field, a nested one by its path, and at most ten of a flood", async () => {
  expect(await refusal(readJsonBody(post({ templateID: "base", templateId: "x" }), NewSandbox, true))).toEqual([
    400,
    'invalid request body: unknown field "templateId": not a field this server serves in this request, so it is refused rather than ignored',
  ]);
  const [, nested] = await refusal(readJsonBody(post({ templateID: "base", autoResume: { enabled: true, onTraffic: 1 } }), NewSandbox, true));
  expect(nested).toContain('unknown field "autoResume.onTraffic"');
  const flood = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`f${i}`, i]));
  const [, many] = await refusal(readJsonBody(post(flood), PauseBody, false));
  expect(many).toStartWith('invalid request body: unknown fields "f0", "f1"');
  expect(many).not.toContain('"f10"');
  // The served fields parse, requireHealthyGuest included.
  expect(await readJsonBody(post({ memory: true, requireHealthyGuest: true }), PauseBody, false)).toEqual({ memory: true, requireHealthyGuest: true });
});

test("each refused create option is named with its reason; every refused network field present is named at once", () => {
  expect(createOptionRefusal({ network: { allowPublicTraffic: false } })).toBeNull();
  expect(createOptionRefusal({ iam: {}, volumeMounts: [], mcp: null, network: {} })).toBeNull();
  const net = createOptionRefusal({ network: { dnsServers: ["1.1.1.1"], allowOut: ["1.1.1.1"], custom: 1, allowPublicTraffic: true } })!;
  expect(net.status).toBe(400);
  expect(net.message).toBe(
    `network.allowOut (an egress allow list), network.dnsServers (the sandbox's DNS servers), network.custom (not a network option this server knows) are not supported: ${EGRESS_POLICY}; leave them out (allow_internet_access chooses the egress lane)`,
  );
  const flood = createOptionRefusal({ network: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, i])) })!;
  expect(flood.message).toContain("network.k9 (not a network option this server knows) and 4990 more are not supported");
  expect(flood.message.length).toBeLessThan(1200);
  expect(createOptionRefusal({ iam: { tokens: { a: {} } } })!.message).toStartWith("iam (workload-identity tokens for egress secret injection) is not supported: ");
  expect(createOptionRefusal({ volumeMounts: [{ name: "v", path: "/v" }] })!.message).toContain("the volume API is not offered");
  expect(createOptionRefusal({ mcp: { exa: {} } })!.message).toContain("MCP gateway template");
});

test("a network update: egress fields refused, the sandbox's own lane and an empty body change nothing", () => {
  expect(networkUpdateRefusal({}, false)).toBeNull();
  expect(networkUpdateRefusal({ allow_internet_access: false }, false)).toBeNull();
  expect(networkUpdateRefusal({ allow_internet_access: true }, true)).toBeNull();
  expect(networkUpdateRefusal({ allow_internet_access: true }, false)!.message).toStartWith("allow_internet_access cannot change on a running sandbox");
  expect(networkUpdateRefusal({ rules: {}, allow_internet_access: false }, false)!.message).toStartWith("rules (per-host egress rules (header transforms, secret injection)) is not supported: ");
});

test("a network field named like an Object.prototype member (constructor, toString) is refused by name, not dropped", async () => {
  // `k in EGRESS_FIELDS` answered true for these, so they were neither a known egress field nor an "other" one:
  // the create and the network update went through as if the field were not there.
  const body = await readJsonBody(post({ templateID: "base", network: { constructor: 1, toString: ["x"] } }), NewSandbox, true);
  const created = createOptionRefusal(body)!;
  expect(created.status).toBe(400);
  expect(created.message).toStartWith("network.constructor (not a network option this server knows), network.toString (not a network option this server knows) are not supported: ");
  const update = networkUpdateRefusal({ hasOwnProperty: true, valueOf: 2 }, false)!;
  expect(update.message).toStartWith("hasOwnProperty (not a network option this server knows), valueOf (not a network option this server knows) are not supported: ");
});
