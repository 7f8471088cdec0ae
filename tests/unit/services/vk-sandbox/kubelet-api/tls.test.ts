import { describe, expect, test } from "bun:test";
import { kubeletTlsPair, selfSignedSans } from "#services/vk-sandbox/kubelet-api/tls.ts";

describe("kubelet TLS SANs", () => {
  test("node name as DNS, node IP as IP, and 127.0.0.1", () => {
    expect(selfSignedSans("vk-a", "10.0.0.1")).toEqual({ dnsNames: ["vk-a"], ips: ["10.0.0.1", "127.0.0.1"] });
  });
  test("a node name that parses as an IP is an IP SAN; duplicates collapse", () => {
    expect(selfSignedSans("127.0.0.1")).toEqual({ dnsNames: [], ips: ["127.0.0.1"] });
    expect(selfSignedSans("fd00::1", "fd00::1")).toEqual({ dnsNames: [], ips: ["fd00::1", "127.0.0.1"] });
  });
  test("an unparsable node IP is kept as a DNS SAN (not validated, as in Go)", () => {
    expect(selfSignedSans("n", "not-an-ip")).toEqual({ dnsNames: ["n", "not-an-ip"], ips: ["127.0.0.1"] });
  });
  test("files that do not exist mean self-signing", async () => {
    const pair = await kubeletTlsPair({ nodeName: "n", tlsCert: "/nonexistent.crt", tlsKey: "/nonexistent.key" });
    expect(pair.source).toBe("self-signed");
    expect(pair.certPem).toContain("BEGIN CERTIFICATE");
  });
});
