// A node's 429 passed through an e2b lifecycle verb keeps the node's Retry-After (whole seconds, 1 to 60), else 1:
// without the header the JS SDK does not retry a 429 at all (docs/e2b.md "Errors as the SDKs see them"). The SDK's
// view of it is in js.test.ts; this pins the value carried.
import { expect, test } from "bun:test";
import { E2bError, fromNode, retryAfterSeconds } from "#shared/e2b/errors.ts";
import { SandboxdCapacity, SandboxdConflict } from "#shared/sandboxd/index.ts";

const ctx = { node: "http://10.0.0.9:7000", route: "POST /v1/sandboxes/sb_x/renew", status: 429 };

test("node 429: our 429 with the node's Retry-After rounded up, bounded to 1..60 s; the node's text stays out of the message", () => {
  const at = (ms: number | undefined) => fromNode(new SandboxdCapacity("429 from node", ctx, { serverMessage: "tenant t2 at cap 5", retryAfterMs: ms }), "sb-x", "failed to extend the sandbox lease");
  expect(at(2_500).headers).toEqual({ "retry-after": "3" });
  expect(at(undefined).headers).toEqual({ "retry-after": "1" });
  expect(at(0).headers).toEqual({ "retry-after": "1" });
  expect(at(3_600_000).headers).toEqual({ "retry-after": "60" });
  const e = at(1_000);
  expect(e).toBeInstanceOf(E2bError);
  expect(e.status).toBe(429);
  expect(e.message).toBe("failed to extend the sandbox lease: the node is at capacity; retry later");
  expect(e.message).not.toContain("t2");
  expect(e.detail).toBe("tenant t2 at cap 5");
});

test("other node 4xx carry no Retry-After", () => {
  const e = fromNode(new SandboxdConflict("409", { ...ctx, status: 409 }), "sb-x", "failed to pause the sandbox");
  expect(e.status).toBe(409);
  expect(e.headers).toBeUndefined();
  expect(retryAfterSeconds(Number.NaN)).toBe(1);
});
