// errorChain: one short line that still says why, when the reason sits in an error's cause.
import { expect, test } from "bun:test";
import { errorChain, errorMessage } from "#shared/log/index.ts";

test("errorChain appends each cause the message does not already hold, once", () => {
  const tls = new Error("unable to verify the first certificate");
  const wrapped = new Error("sandboxd GET /v1/sandboxes/sb_1 on https://node:7777: sending the request failed", { cause: tls });
  expect(errorChain(wrapped)).toBe("sandboxd GET /v1/sandboxes/sb_1 on https://node:7777: sending the request failed: unable to verify the first certificate");
  // A cause already spelled out in the message is not repeated; a non-Error value is stringified.
  expect(errorChain(new Error("ports relay dial failed: ECONNREFUSED", { cause: new Error("ECONNREFUSED") }))).toBe("ports relay dial failed: ECONNREFUSED");
  expect(errorChain("plain")).toBe(errorMessage("plain"));
  // A cycle ends.
  const a = new Error("a");
  const b = new Error("b", { cause: a });
  (a as { cause?: unknown }).cause = b;
  expect(errorChain(a)).toBe("a: b");
});
