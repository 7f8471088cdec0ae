import { describe, expect, test } from "bun:test";
import { listenAddressCheck, listenPort, splitHostPort } from "#shared/config/host-port.ts";

describe("host:port like Go's net.SplitHostPort", () => {
  test("splits the usual shapes", () => {
    expect(splitHostPort(":10260")).toEqual({ host: "", port: "10260" });
    expect(splitHostPort("0.0.0.0:8443")).toEqual({ host: "0.0.0.0", port: "8443" });
    expect(splitHostPort("[::1]:7777")).toEqual({ host: "::1", port: "7777" });
    expect(splitHostPort("node-1:7777")).toEqual({ host: "node-1", port: "7777" });
  });

  test("refuses a bare port, a bare IPv6 address and stray brackets", () => {
    expect(() => splitHostPort("10260")).toThrow("missing port");
    expect(() => splitHostPort("::1")).toThrow("too many colons");
    expect(() => splitHostPort("[::1]")).toThrow("missing port");
    expect(() => splitHostPort("[::1")).toThrow("missing ']'");
  });

  test("a listen port is an integer from 1 to 65535", () => {
    expect(listenPort(":10260")).toBe(10260);
    expect(() => listenPort(":0")).toThrow("out of range");
    expect(() => listenPort(":65536")).toThrow("out of range");
    expect(() => listenPort(":http")).toThrow("not a number");
  });

  test("listen-address checks allow port 0 unless told not to", () => {
    expect(listenAddressCheck()("127.0.0.1:0")).toBeUndefined();
    expect(listenAddressCheck(false)("127.0.0.1:0")).toContain("out of range");
    expect(listenAddressCheck()("8443")).toContain("missing port");
  });
});
