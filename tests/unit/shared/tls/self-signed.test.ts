import { describe, expect, test } from "bun:test";
import { x509 } from "#shared/x509/index.ts";
import { createCA, selfSignedServingCert } from "#shared/tls/index.ts";
import { serveHello } from "./serve-hello.ts";

describe("selfSignedServingCert", () => {
  test("names every requested DNS and IP SAN", async () => {
    const { certPem } = await selfSignedServingCert({ cn: "node-1", dnsNames: ["node-1", "localhost"], ips: ["127.0.0.1", "10.1.2.3"] });
    const cert = new x509.X509Certificate(certPem);
    const san = cert.getExtension(x509.SubjectAlternativeNameExtension)!;
    const names = san.names.toJSON();
    expect(names).toContainEqual({ type: "dns", value: "node-1" });
    expect(names).toContainEqual({ type: "dns", value: "localhost" });
    expect(names).toContainEqual({ type: "ip", value: "127.0.0.1" });
    expect(names).toContainEqual({ type: "ip", value: "10.1.2.3" });
    expect(cert.subject).toBe("CN=node-1");
  });

  test("is an ECDSA P-256 serving leaf, not a CA, valid from an hour ago for ten years", async () => {
    const before = Date.now();
    const { certPem, keyPem } = await selfSignedServingCert({ cn: "n", ips: ["127.0.0.1"] });
    const cert = new x509.X509Certificate(certPem);
    expect(cert.publicKey.algorithm).toMatchObject({ name: "ECDSA", namedCurve: "P-256" });
    expect(cert.getExtension(x509.BasicConstraintsExtension)!.ca).toBe(false);
    expect(cert.getExtension(x509.KeyUsagesExtension)!.usages).toBe(x509.KeyUsageFlags.digitalSignature);
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)!.usages).toEqual([x509.ExtendedKeyUsage.serverAuth]);
    const hour = 3_600_000;
    expect(Math.abs(cert.notBefore.getTime() - (before - hour))).toBeLessThan(5_000);
    const tenYears = 10 * 365 * 24 * hour;
    expect(Math.abs(cert.notAfter.getTime() - (before + tenYears))).toBeLessThan(5_000);
    expect(keyPem).toStartWith("-----BEGIN PRIVATE KEY-----");
  });

  test("serials are random and 128 bits wide", async () => {
    const a = new x509.X509Certificate((await selfSignedServingCert({ cn: "a" })).certPem);
    const b = new x509.X509Certificate((await selfSignedServingCert({ cn: "a" })).certPem);
    expect(a.serialNumber).not.toBe(b.serialNumber);
    // 16 bytes, plus a 0x00 pad when the top bit is set (DER integers are signed).
    expect(BigInt(`0x${a.serialNumber}`)).toBeLessThan(1n << 128n);
    expect(a.serialNumber.replace(/^00/, "").length).toBeGreaterThanOrEqual(28);
  });

  test("Bun.serve accepts the PEMs; a client trusting the cert connects and one trusting another CA is refused", async () => {
    const pair = await selfSignedServingCert({ cn: "localhost", dnsNames: ["localhost"], ips: ["127.0.0.1"] });
    const other = await createCA("someone-else");
    await using server = serveHello({ cert: pair.certPem, key: pair.keyPem });
    const ok = await fetch(server.url, { tls: { ca: pair.certPem } });
    expect(await ok.text()).toBe("hello");
    await expect(fetch(server.url, { tls: { ca: other.certPem } })).rejects.toThrow();
    await expect(fetch(server.url)).rejects.toThrow();
  });
});
