import { describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { x509 } from "#shared/x509/index.ts";
import { ipBytes, oid, tlv, time, unsignedInteger } from "#shared/tls/der.ts";
import { selfSignedServingCert } from "#shared/tls/index.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("der", () => {
  test("lengths: short form below 128, long form from 128", () => {
    expect(hex(tlv(0x04, new Uint8Array(127))).slice(0, 4)).toBe("047f");
    expect(hex(tlv(0x04, new Uint8Array(128))).slice(0, 6)).toBe("048180");
    expect(hex(tlv(0x04, new Uint8Array(300))).slice(0, 8)).toBe("0482012c");
  });

  test("OIDs with multi-byte arcs (X.690 8.19)", () => {
    expect(hex(oid("1.2.840.10045.4.3.2"))).toBe("06082a8648ce3d040302");
    expect(hex(oid("2.5.29.17"))).toBe("0603551d11");
  });

  test("integers stay positive and minimal", () => {
    expect(hex(unsignedInteger(Uint8Array.of(0x80)))).toBe("02020080");
    expect(hex(unsignedInteger(Uint8Array.of(0, 0, 0x7f)))).toBe("02017f");
    expect(hex(unsignedInteger(Uint8Array.of(0)))).toBe("020100");
  });

  test("UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 4.1.2.5)", () => {
    expect(Buffer.from(time(new Date("2049-12-31T23:59:59Z")).subarray(2)).toString()).toBe("491231235959Z");
    expect(time(new Date("2049-12-31T23:59:59Z"))[0]).toBe(0x17);
    expect(Buffer.from(time(new Date("2050-01-01T00:00:00Z")).subarray(2)).toString()).toBe("20500101000000Z");
    expect(time(new Date("2050-01-01T00:00:00Z"))[0]).toBe(0x18);
  });

  test("IP literals: v4, v6 with ::, v6 with an embedded quad; junk refused", () => {
    expect([...ipBytes("10.1.2.3")]).toEqual([10, 1, 2, 3]);
    expect(hex(ipBytes("::1"))).toBe("00000000000000000000000000000001");
    expect(hex(ipBytes("fd00::a:1"))).toBe("fd0000000000000000000000000a0001");
    expect(hex(ipBytes("::ffff:10.0.0.1"))).toBe("00000000000000000000ffff0a000001");
    expect(hex(ipBytes("1:2:3:4:5:6:7:8"))).toBe("00010002000300040005000600070008");
    expect(() => ipBytes("1:2:3")).toThrow(/not an IP address/);
    expect(() => ipBytes("::g")).toThrow(/not an IP address/);
  });
});

describe("the hand-encoded self-signed certificate, read by two independent parsers", () => {
  test("node:crypto and @peculiar/x509 agree on names, SANs (v4 and v6), validity, and the signature verifies", async () => {
    const { certPem } = await selfSignedServingCert({ cn: "node-7", dnsNames: ["node-7", "node-7.example"], ips: ["10.0.0.7", "fd00::7"] });
    const n = new X509Certificate(certPem);
    expect(n.subject).toBe("CN=node-7");
    expect(n.issuer).toBe("CN=node-7");
    expect(n.subjectAltName).toBe("DNS:node-7, DNS:node-7.example, IP Address:10.0.0.7, IP Address:FD00:0:0:0:0:0:0:7");
    expect(n.ca).toBe(false);
    expect(n.verify(n.publicKey)).toBe(true);
    const p = new x509.X509Certificate(certPem);
    expect(await p.verify({ signatureOnly: true })).toBe(true);
    expect(p.notAfter.getTime()).toBe(new Date(n.validTo).getTime());
  });

  test("a certificate without names has no SAN extension at all (an empty one is invalid DER)", async () => {
    const p = new x509.X509Certificate((await selfSignedServingCert({ cn: "bare" })).certPem);
    expect(p.getExtension(x509.SubjectAlternativeNameExtension)).toBeNull();
  });
});
