import { expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { certFields, createCA, createIntermediateCA, issueCertificate } from "#shared/tls/index.ts";
import { x509 } from "#shared/x509/index.ts";

const der = (pem: string) => new Uint8Array(Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ""), "base64"));

test("the subject's CN and every O come out in order, as @peculiar/x509 and node:crypto read them", async () => {
  const ca = await createCA("client-ca");
  const orgs = ["system:masters", "dev, ops+1", "grüppe"];
  const leaf = await issueCertificate({ ca, cn: "alice, the admin", organizations: orgs, usages: "client" });
  const { subject: attrs, pathLength } = certFields(der(leaf.certPem));
  expect(pathLength).toBeUndefined();
  expect(attrs).toEqual([["CN", "alice, the admin"], ...orgs.map((o): [string, string] => ["O", o])]);
  const name = new x509.X509Certificate(leaf.certPem).subjectName;
  expect(attrs.filter(([k]: [string, string]) => k === "O").map(([, v]: [string, string]) => v)).toEqual(name.getField("O"));
  expect(new X509Certificate(leaf.certPem).subject.split("\n")[0]).toBe("CN=alice\\, the admin");
});

test("a certificate with a version-less TBS, PrintableString and BMPString values, and a multi-valued RDN", () => {
  // Hand-built TBS: no [0] version, serial, sigAlg, issuer, validity, subject { SET{CN printable}, SET{O bmp, O utf8} }.
  const t = (tag: number, ...c: number[][]) => {
    const body = c.flat();
    return [tag, body.length, ...body];
  };
  const oidCN = [0x06, 3, 0x55, 0x04, 0x03];
  const oidO = [0x06, 3, 0x55, 0x04, 0x0a];
  const subject = t(0x30, t(0x31, t(0x30, oidCN, t(0x13, [...Buffer.from("bob")]))), t(0x31, t(0x30, oidO, t(0x1e, [0, 0x67, 0, 0xfc])), t(0x30, oidO, t(0x0c, [...Buffer.from("ops")]))));
  const tbs = t(0x30, t(0x02, [1]), t(0x30), t(0x30), t(0x30), subject);
  const cert = new Uint8Array(t(0x30, tbs, t(0x30), t(0x03, [0])));
  expect(certFields(cert)).toEqual({ pathLength: undefined, subject: [["CN", "bob"], ["O", "gü"], ["O", "ops"]] });
});

test("malformed DER is refused, not misread", () => {
  expect(() => certFields(new Uint8Array([1, 2, 3]))).toThrow(/certificate DER/);
  expect(() => certFields(new Uint8Array([0x30, 0x05, 0x30, 0x10, 0, 0, 0]))).toThrow(/certificate DER/);
  expect(() => certFields(new Uint8Array([0x30, 0x02, 0x30, 0x00]))).toThrow(/certificate DER/);
});

test("the path length of a CA's basic constraints, as @peculiar/x509 reads it", async () => {
  const root = await createCA("root-ca");
  const capped = await createIntermediateCA({ parent: root, cn: "capped", pathLength: 0 });
  const open = await createIntermediateCA({ parent: root, cn: "open" });
  for (const c of [capped, open, root]) {
    const read = new x509.X509Certificate(c.certPem).getExtension(x509.BasicConstraintsExtension)?.pathLength;
    expect(certFields(der(c.certPem)).pathLength).toBe(read);
  }
  expect(certFields(der(capped.certPem)).pathLength).toBe(0);
});
