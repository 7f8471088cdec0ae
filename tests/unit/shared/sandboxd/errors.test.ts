// shared/sandboxd/errors.ts: the classification helpers callers decide with.
import { describe, expect, test } from "bun:test";
import {
  SandboxdAmbiguousClaim,
  SandboxdCapacity,
  SandboxdConflict,
  SandboxdNotFound,
  SandboxdProtocol,
  SandboxdRedirect,
  SandboxdRouteNotFound,
  SandboxdServerError,
  SandboxdTransport,
  isCapacity,
  isNotFound,
  isSandboxdError,
  provablyUndelivered,
} from "#shared/sandboxd/errors.ts";

const ctx = { node: "10.0.0.5:7777", route: "POST /v1/claim", claimRef: "ns/a" };

describe("classification", () => {
  test("only a handled 404 is not-found; a router miss is not", () => {
    expect(isNotFound(new SandboxdNotFound("x", ctx))).toBe(true);
    expect(isNotFound(new SandboxdRouteNotFound("x", ctx))).toBe(false);
  });

  test("429, an empty 200 and a redirect are capacity misses", () => {
    expect(isCapacity(new SandboxdCapacity("x", ctx))).toBe(true);
    expect(isCapacity(new SandboxdRedirect("x", ctx, { targets: [], requirePromoted: false, exhausted: true }))).toBe(true);
    expect(isCapacity(new SandboxdConflict("x", ctx))).toBe(false);
  });

  test("a claim may be repeated only when the node provably handed out nothing", () => {
    expect(provablyUndelivered(new SandboxdCapacity("x", ctx))).toBe(true);
    expect(provablyUndelivered(new SandboxdTransport("x", ctx, { delivered: "no" }))).toBe(true);
    expect(provablyUndelivered(new SandboxdServerError("x", ctx, { serverMessage: "provisioning failed" }))).toBe(true);
    expect(provablyUndelivered(new SandboxdTransport("x", ctx, { delivered: "maybe", timedOut: true }))).toBe(false);
    expect(provablyUndelivered(new SandboxdServerError("x", ctx, { serverMessage: "bad gateway" }))).toBe(false);
    expect(provablyUndelivered(new SandboxdProtocol("x", ctx, { problem: "bad_json" }))).toBe(false);
    expect(provablyUndelivered(new SandboxdAmbiguousClaim("x", ctx, { candidates: [] }))).toBe(false);
    expect(provablyUndelivered(new Error("x"))).toBe(false);
  });

  test("errors carry code, context, cause and their class name", () => {
    const cause = new Error("ECONNRESET");
    const e = new SandboxdTransport("reset", ctx, { delivered: "maybe", cause });
    expect(e.code).toBe("transport");
    expect(e.name).toBe("SandboxdTransport");
    expect(e.context.claimRef).toBe("ns/a");
    expect(e.cause).toBe(cause);
    expect(isSandboxdError(e)).toBe(true);
    expect(isSandboxdError(cause)).toBe(false);
  });
});
