import { describe, expect, test } from "bun:test";
import { x509 } from "#shared/x509/index.ts";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCA, createIntermediateCA, issueCertificate } from "#shared/tls/index.ts";
import { serveHello } from "./serve-hello.ts";

describe("createCA / issueCertificate", () => {
  test("a leaf chains to its CA and carries subject CN, O, SANs and the asked-for EKU", async () => {
    const ca = await createCA("test-ca");
    const leaf = await issueCertificate({
      ca, cn: "admin", organizations: ["system:masters", "team"], dnsNames: ["api.local"], ips: ["::1"], usages: "both",
    });
    const caCert = new x509.X509Certificate(ca.certPem);
    const cert = new x509.X509Certificate(leaf.certPem);
    expect(caCert.getExtension(x509.BasicConstraintsExtension)!.ca).toBe(true);
    expect(cert.issuer).toBe("CN=test-ca");
    expect(cert.subject).toContain("CN=admin");
    expect(cert.subject).toContain("O=system:masters");
    expect(cert.subject).toContain("O=team");
    expect(await cert.verify({ publicKey: caCert.publicKey })).toBe(true);
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)!.usages).toEqual([
      x509.ExtendedKeyUsage.serverAuth,
      x509.ExtendedKeyUsage.clientAuth,
    ]);
    const names = cert.getExtension(x509.SubjectAlternativeNameExtension)!.names.toJSON();
    expect(names).toContainEqual({ type: "dns", value: "api.local" });
    expect(names.find((n) => n.type === "ip")).toBeDefined();
  });

  test("a client usage leaf has no serverAuth", async () => {
    const ca = await createCA("c");
    const cert = new x509.X509Certificate((await issueCertificate({ ca, cn: "u", usages: "client" })).certPem);
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)!.usages).toEqual([x509.ExtendedKeyUsage.clientAuth]);
    expect(cert.getExtension(x509.SubjectAlternativeNameExtension)).toBeNull();
  });

  test("Bun fetch trusts a CA-signed server only through that CA", async () => {
    const ca = await createCA("serving-ca");
    const other = await createCA("other-ca");
    const leaf = await issueCertificate({ ca, cn: "localhost", dnsNames: ["localhost"], ips: ["127.0.0.1"], usages: "server" });
    await using server = serveHello({ cert: leaf.certPem, key: leaf.keyPem });
    expect(await (await fetch(server.url, { tls: { ca: ca.certPem } })).text()).toBe("hello");
    await expect(fetch(server.url, { tls: { ca: other.certPem } })).rejects.toThrow();
  });

  test("a server requiring client certs admits one signed by its client CA and refuses one that is not", async () => {
    const ca = await createCA("serving-ca");
    const clientCa = await createCA("client-ca");
    const stranger = await createCA("stranger-ca");
    const leaf = await issueCertificate({ ca, cn: "localhost", ips: ["127.0.0.1"], usages: "server" });
    const good = await issueCertificate({ ca: clientCa, cn: "alice", usages: "client" });
    const bad = await issueCertificate({ ca: stranger, cn: "mallory", usages: "client" });
    await using server = serveHello({
      cert: leaf.certPem, key: leaf.keyPem, ca: clientCa.certPem, requestCert: true, rejectUnauthorized: true,
    });
    const ok = await fetch(server.url, { tls: { ca: ca.certPem, cert: good.certPem, key: good.keyPem } });
    expect(ok.status).toBe(200);
    await expect(fetch(server.url, { tls: { ca: ca.certPem, cert: bad.certPem, key: bad.keyPem } })).rejects.toThrow();
  });

  // openssl verify is an independent X.509 path validator: the chain must hold for it, not only for our verifier.
  test.skipIf(Bun.which("openssl") === null)("an intermediate CA's leaf verifies to the root only with the intermediate; pathLength is honoured", async () => {
    const dir = mkdtempSync(join(tmpdir(), "intermediate-ca-"));
    try {
      const root = await createCA("root-ca");
      const inter = await createIntermediateCA({ parent: root, cn: "intermediate-ca", pathLength: 0 });
      const below = await createIntermediateCA({ parent: inter, cn: "too-deep-ca" });
      const leaf = await issueCertificate({ ca: inter, cn: "bob", usages: "client" });
      const deep = await issueCertificate({ ca: below, cn: "carol", usages: "client" });
      const file = (name: string, pem: string) => {
        writeFileSync(join(dir, name), pem);
        return join(dir, name);
      };
      const verify = (untrusted: string | undefined, cert: string) => {
        const args = ["openssl", "verify", "-purpose", "sslclient", "-CAfile", file("root.pem", root.certPem)];
        if (untrusted) args.push("-untrusted", untrusted);
        const p = Bun.spawnSync([...args, cert]);
        return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
      };
      expect(new x509.X509Certificate(inter.certPem).issuer).toBe(root.subject);
      expect(verify(file("inter.pem", inter.certPem), file("leaf.pem", leaf.certPem)).code).toBe(0);
      expect(verify(undefined, file("leaf.pem", leaf.certPem)).code).not.toBe(0);
      const tooDeep = verify(file("chain.pem", below.certPem + inter.certPem), file("deep.pem", deep.certPem));
      expect(tooDeep.code).not.toBe(0);
      expect(tooDeep.out).toContain("path length constraint exceeded");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
