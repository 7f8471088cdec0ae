import { expect, test } from "bun:test";
import {
  isAlreadyExists,
  isConflict,
  isForbidden,
  isGone,
  isNotFound,
  isUnauthorized,
  KubeApiError,
} from "#shared/kube/errors.ts";

const status = (code: number, reason: string, details?: object) => ({ kind: "Status", apiVersion: "v1", status: "Failure", code, reason, message: `m-${reason}`, details });

test("an error from a Status body carries verb, path, reason, details and the body", () => {
  const body = status(404, "NotFound", { name: "p1", kind: "pods" });
  const e = KubeApiError.fromResponse(404, "get", "/api/v1/namespaces/a/pods/p1", body);
  expect(e.status).toBe(404);
  expect(e.reason).toBe("NotFound");
  expect(e.details).toEqual({ name: "p1", kind: "pods" });
  expect(e.verb).toBe("get");
  expect(e.path).toBe("/api/v1/namespaces/a/pods/p1");
  expect(e.body).toBe(body);
  expect(e.message).toBe("get /api/v1/namespaces/a/pods/p1: 404 NotFound: m-NotFound");
});

const helpers = { isNotFound, isConflict, isForbidden, isGone, isAlreadyExists, isUnauthorized };
test.each([
  [status(404, "NotFound"), "isNotFound"],
  [status(409, "Conflict"), "isConflict"],
  [status(409, "AlreadyExists"), "isAlreadyExists"],
  [status(403, "Forbidden"), "isForbidden"],
  [status(401, "Unauthorized"), "isUnauthorized"],
  [status(410, "Expired"), "isGone"],
  [status(410, "Gone"), "isGone"],
  ["plain text from a proxy", "isNotFound", 404],
  [undefined, "isConflict", 409],
  [undefined, "isGone", 410],
  [{ kind: "Status", code: 409, reason: "SomethingNew" }, "isConflict"],
].map(([body, which, code]) => ({ body, which, code, label: `${code ?? (body as { code: number }).code} ${(body as { reason?: string })?.reason ?? JSON.stringify(body)}` })) as {
  body: unknown;
  which: keyof typeof helpers;
  code?: number;
}[])(
  "$label classifies as $which and nothing else",
  ({ body, which, code }) => {
  const c = code ?? (body as { code: number }).code;
  const e = KubeApiError.fromResponse(c, "x", "/p", body);
  for (const [name, fn] of Object.entries(helpers)) expect([name, fn(e)]).toEqual([name, name === which]);
  },
);

test("non-errors and foreign errors classify as nothing", () => {
  for (const fn of Object.values(helpers)) {
    expect(fn(new Error("404"))).toBe(false);
    expect(fn(undefined)).toBe(false);
    expect(fn({ status: 404 })).toBe(false);
  }
});
