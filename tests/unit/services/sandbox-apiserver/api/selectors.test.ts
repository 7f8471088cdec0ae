import { describe, expect, test } from "bun:test";
import { SelectorError, parseFieldSelector, parseLabelSelector } from "#services/sandbox-apiserver/api/selectors.ts";
import { sandboxFromEntry } from "#services/sandbox-apiserver/sandboxes/object.ts";

const labels = { "sandbox.cocoonstack.io/node": "n1", "sandbox.cocoonstack.io/phase": "Running", app: "x" };

describe("label selectors", () => {
  const table: [string, boolean][] = [
    ["", true],
    ["sandbox.cocoonstack.io/node=n1", true],
    ["sandbox.cocoonstack.io/node==n1", true],
    ["sandbox.cocoonstack.io/node!=n1", false],
    ["sandbox.cocoonstack.io/node in (n2, n1)", true],
    ["sandbox.cocoonstack.io/node notin (n1)", false],
    ["sandbox.cocoonstack.io/template", false],
    ["!sandbox.cocoonstack.io/template", true],
    ["app=x,sandbox.cocoonstack.io/phase=Running", true],
    ["app=x,sandbox.cocoonstack.io/phase=Hibernated", false],
    ["missing!=v", true],
  ];
  for (const [sel, want] of table) test(`"${sel}" matches: ${want}`, () => expect(parseLabelSelector(sel).matches(labels)).toBe(want));

  test("an image reference as a value is refused (/ and : are not label value characters)", () => {
    expect(() => parseLabelSelector("sandbox.cocoonstack.io/template=ghcr.io/x:1")).toThrow(SelectorError);
  });
  test("a key with an invalid prefix is refused", () => expect(() => parseLabelSelector("Bad_Prefix/x=y")).toThrow(SelectorError));
  test("garbage is refused", () => expect(() => parseLabelSelector("a b c")).toThrow(SelectorError));
});

describe("field selectors", () => {
  const s = sandboxFromEntry({ name: "team/x", id: "sb_1", phase: "Running" }, "n1");
  test("metadata.name, metadata.namespace and status.nodeName match; != negates", () => {
    expect(parseFieldSelector("metadata.name=x").matches(s)).toBe(true);
    expect(parseFieldSelector("metadata.namespace=team,status.nodeName=n1").matches(s)).toBe(true);
    expect(parseFieldSelector("status.nodeName!=n1").matches(s)).toBe(false);
  });
  test("an exact metadata.name pins the request", () => {
    expect(parseFieldSelector("metadata.name==x").exactName).toBe("x");
    expect(parseFieldSelector("metadata.name!=x").exactName).toBeUndefined();
  });
  test("any other field is a 400 naming it", () => {
    expect(() => parseFieldSelector("spec.foo=bar")).toThrow('field selector "spec.foo" is not supported on sandboxes');
  });
});
