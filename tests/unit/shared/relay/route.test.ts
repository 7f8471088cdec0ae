// Host and header routing (docs/envd-relay.md "Routing"): the spec's table, then fast-check properties.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { envdPathVerdict, hostWithoutPort, isEnvdInternalPath, isSignedFileUrl, parsePort, routeFromHost, routeRequest } from "#shared/relay/route.ts";

const D = "sandbox.example.com";
const headers = (h: Record<string, string>) => new Headers(h);

describe("the spec's routing table", () => {
  test.each([
    ["49983-sb-0123abcd.sandbox.example.com", "sb-0123abcd", 49983],
    ["49983-SB-0123ABCD.Sandbox.Example.com:443", "sb-0123abcd", 49983],
    ["3000-sb-abc.sandbox.example.com", "sb-abc", 3000],
    ["007-sb_abc.sandbox.example.com", "sb_abc", 7],
  ])("%s -> %s:%d", (host, id, port) => {
    expect(routeFromHost(host, D)).toEqual({ id, port, via: "host" });
  });
  test.each(["example.com", `sb-abc.${D}`, `-sb-abc.${D}`, `0-sb-abc.${D}`, `x-sb-abc.${D}`, `a.b-sb.${D}`, `70000-sb.${D}`, `+22-sb.${D}`, `49983-.${D}`, D, `.${D}`])("%s -> no route", (host) => {
    expect(routeFromHost(host, D)).toBeUndefined();
  });
  test("headers win over the host, which is then not looked at", () => {
    const r = routeRequest(headers({ "e2b-sandbox-id": " sb-abc ", "e2b-sandbox-port": "8080" }), `3000-sb-zzz.${D}`, D);
    expect(r).toEqual({ ok: true, route: { id: "sb-abc", port: 8080, via: "header" } });
    expect(routeRequest(headers({ "e2b-sandbox-id": "sb-abc" }), "anything", D)).toEqual({ ok: false, namesSandbox: true });
    expect(routeRequest(headers({ "e2b-sandbox-id": "sb-abc", "e2b-sandbox-port": "abc" }), `3000-sb-zzz.${D}`, D)).toEqual({ ok: false, namesSandbox: true });
  });
  test("only a request naming no sandbox may reach the proxy's own /healthz", () => {
    expect(routeRequest(headers({}), D, D)).toEqual({ ok: false, namesSandbox: false });
    expect(routeRequest(headers({}), "10.0.0.1:8443", D)).toEqual({ ok: false, namesSandbox: false });
    expect(routeRequest(headers({}), `junk.${D}`, D)).toEqual({ ok: false, namesSandbox: true });
  });
  test("envd-internal paths and signed file URLs", () => {
    for (const p of ["/init", "/INIT", "/init/", "//init//", "/freeze", "/unfreeze", "/fsfreeze", "/fsthaw", "/collapse"]) expect(isEnvdInternalPath(p)).toBe(true);
    for (const p of ["/files", "/initx", "/a/init", "/"]) expect(isEnvdInternalPath(p)).toBe(false);
    const u = (q: string) => new URL(`http://h/files?${q}`);
    expect(isSignedFileUrl(49983, "GET", u("signature=v1_x"))).toBe(true);
    expect(isSignedFileUrl(49983, "POST", u("signature=v1_x"))).toBe(true);
    expect(isSignedFileUrl(49983, "DELETE", u("signature=v1_x"))).toBe(false);
    expect(isSignedFileUrl(3000, "GET", u("signature=v1_x"))).toBe(false);
    expect(isSignedFileUrl(49983, "GET", u("signature="))).toBe(false);
  });
});

describe("the envd-internal path guard sees the path the guest will see (issue 17 case 10)", () => {
  test.each(["/%69nit", "/%69%6E%69%74", "/%2finit", "/x/%2e%2e/init", "/x/../init", "/./init", "/Fr%45eze", "/files/../collapse"])("%s is internal", (p) => {
    expect(envdPathVerdict(p)).toBe("internal");
  });
  test.each(["/%zz", "/%e0%a4%a", "/%ff", "/files%"])("%s does not decode: refused", (p) => {
    expect(envdPathVerdict(p)).toBe("undecodable");
  });
  // Already-normal paths take a shortcut (no split and join, docs/performance.md): the same verdicts as the long way.
  test.each(["/init", "/INIT", "/init/", "//init", "/Freeze", "/fsthaw//", "/.//collapse"])("%s is internal (plain)", (p) => {
    expect(envdPathVerdict(p)).toBe("internal");
  });
  test.each(["/", "/health", "/initx", "/files/init", "/init.d", "/x/init"])("%s is relayable (plain)", (p) => {
    expect(envdPathVerdict(p)).toBe("relayable");
  });
  test.each(["/files", "/files/%69nit", "/%2569nit", "/a%20b", "/caf%C3%A9"])("%s is relayable", (p) => {
    expect(envdPathVerdict(p)).toBe("relayable");
  });
  test("as the relay receives it: WHATWG URL keeps %69 encoded, so the guard must decode", () => {
    expect(new URL("http://h/%69nit").pathname).toBe("/%69nit");
    expect(envdPathVerdict(new URL("http://h/%69nit").pathname)).toBe("internal");
  });
});

const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?$/);
const domain = fc.array(label, { minLength: 1, maxLength: 3 }).map((ls) => ls.join("."));
const id = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,30}$/);

describe("properties", () => {
  test("any port 1-65535 and id round-trip through {port}-{id}.{domain}, with any case and a :port suffix", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 65535 }), id, domain, fc.boolean(), fc.option(fc.integer({ min: 1, max: 65535 })), (port, sid, d, upper, suffix) => {
        let host = `${port}-${sid}.${d}`;
        if (upper) host = host.toUpperCase();
        if (suffix !== null) host += `:${suffix}`;
        expect(routeFromHost(host, d)).toEqual({ id: sid, port, via: "host" });
      }),
    );
  });
  test("no input string ever throws, and a route always has a port in range and a non-empty id without dots", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), fc.string({ maxLength: 30 }), (host, d) => {
        const r = routeFromHost(host, d);
        if (r) {
          expect(r.port).toBeGreaterThanOrEqual(1);
          expect(r.port).toBeLessThanOrEqual(65535);
          expect(r.id.length).toBeGreaterThan(0);
          expect(r.id.includes(".")).toBe(false);
        }
      }),
      { numRuns: 2000 },
    );
  });
  test("a host outside the domain never routes", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 65535 }), id, domain, domain, (port, sid, d1, d2) => {
        fc.pre(!`.${d1}`.endsWith(`.${d2}`));
        expect(routeFromHost(`${port}-${sid}.${d1}`, d2)).toBeUndefined();
      }),
    );
  });
  test("port text: exactly the unsigned decimals 1-65535 (leading zeros allowed, surrounding spaces trimmed)", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 8 }), (t) => {
        const p = parsePort(t);
        const trimmed = t.trim();
        const expected = /^[0-9]+$/.test(trimmed) && Number(trimmed) >= 1 && Number(trimmed) <= 65535 ? Number(trimmed) : undefined;
        expect(p).toBe(expected);
      }),
      { numRuns: 3000 },
    );
    fc.assert(fc.property(fc.integer({ min: 1, max: 65535 }), fc.nat(3), (n, zeros) => expect(parsePort("0".repeat(zeros) + String(n))).toBe(n)));
  });
  test("header routing: any non-blank id with a valid port routes to exactly that id (trimmed), whatever the host", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 40 }).filter((s) => s.trim() !== "" && !/[\r\n\0]/.test(s)), fc.integer({ min: 1, max: 65535 }), fc.string({ maxLength: 40 }), (sid, port, host) => {
        const r = routeRequest({ get: (n: string) => (n === "e2b-sandbox-id" ? sid : n === "e2b-sandbox-port" ? ` ${port} ` : null) }, host, D);
        expect(r).toEqual({ ok: true, route: { id: sid.trim(), port, via: "header" } });
      }),
    );
  });
  test("hostWithoutPort drops exactly one :port and keeps bracketed IPv6", () => {
    expect(hostWithoutPort("[::1]:8443")).toBe("[::1]");
    expect(hostWithoutPort("A.B:1")).toBe("a.b");
    expect(hostWithoutPort("::1")).toBe("::1");
  });
});
