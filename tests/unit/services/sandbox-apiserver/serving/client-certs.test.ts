// Client certificate verification (docs/serving.md "Client certificates"): chains up to the configured CAs as Go's
// x509 verification builds them, with certificates minted by shared/tls.
import { describe, expect, test } from "bun:test";
import { ClientCertVerifier, type PeerCert, parseCertBundle } from "#services/sandbox-apiserver/serving/client-certs.ts";
import { createCA, createIntermediateCA, issueCertificate } from "#shared/tls/index.ts";

/** The DER bytes of a one-certificate PEM, as a TLS peer presents them. */
const der = (pem: string) => new Uint8Array(Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ""), "base64"));
const HOUR = 3_600_000;
const reason = (p: PeerCert) => (p.source === "rejected" ? p.reason : `verified by ${p.source}`);

describe("client certificate verdicts", async () => {
  const frontProxyCA = await createCA("front-proxy-ca");
  const clientCA = await createCA("client-ca");
  const otherCA = await createCA("other-ca");
  const aggregator = der((await issueCertificate({ ca: frontProxyCA, cn: "front-proxy-client", usages: "client" })).certPem);
  const admin = der((await issueCertificate({ ca: clientCA, cn: "alice", organizations: ["system:masters"], usages: "client" })).certPem);
  const stranger = der((await issueCertificate({ ca: otherCA, cn: "mallory", usages: "client" })).certPem);
  const now = new Date();
  const ten = new Date(now.getTime() + 11 * 365 * 24 * HOUR); // past the default ten-year validity

  test("each certificate is classified by its authority, again and again (the second answer comes from the kept verdict)", async () => {
    const v = new ClientCertVerifier(parseCertBundle(frontProxyCA.certPem), parseCertBundle(clientCA.certPem));
    for (let i = 0; i < 2; i++) {
      expect(await v.classify(aggregator, now)).toEqual({ source: "requestheader", commonName: "front-proxy-client", organizations: [] });
      expect((await v.classify(admin, now)).source).toBe("client");
      expect(reason(await v.classify(stranger, now))).toBe(
        'client certificate "CN=mallory": not verified by the front-proxy CA (--requestheader-client-ca-file): signed by unknown authority (issuer "CN=other-ca"); ' +
          'not verified by the client CA (--client-ca-file): signed by unknown authority (issuer "CN=other-ca")',
      );
      expect(reason(await v.classify(new Uint8Array([1, 2, 3]), now))).toStartWith("unparseable certificate");
    }
  });

  test("a kept verdict still honours the validity window", async () => {
    const v = new ClientCertVerifier(parseCertBundle(frontProxyCA.certPem), []);
    expect((await v.classify(aggregator, now)).source).toBe("requestheader");
    expect(reason(await v.classify(aggregator, ten))).toContain('"CN=front-proxy-client" expired at');
    expect(reason(await v.classify(aggregator, new Date(now.getTime() - 2 * HOUR)))).toContain('"CN=front-proxy-client" is not valid before');
    expect((await v.classify(aggregator, now)).source).toBe("requestheader");
  });

  test("replacing the authorities drops every kept verdict", async () => {
    const v = new ClientCertVerifier(parseCertBundle(frontProxyCA.certPem), []);
    expect((await v.classify(aggregator, now)).source).toBe("requestheader");
    expect((await v.classify(stranger, now)).source).toBe("rejected");
    v.update(parseCertBundle(otherCA.certPem), []);
    expect((await v.classify(aggregator, now)).source).toBe("rejected");
    expect(await v.classify(stranger, now)).toMatchObject({ source: "requestheader", commonName: "mallory" });
  });
});

describe("chains with intermediates", async () => {
  const root = await createCA("client-root");
  const inter = await createIntermediateCA({ parent: root, cn: "client-intermediate" });
  const inter2 = await createIntermediateCA({ parent: inter, cn: "client-intermediate-2" });
  const leaf = await issueCertificate({ ca: inter, cn: "bob", organizations: ["devs"], usages: "client" });
  const deep = await issueCertificate({ ca: inter2, cn: "carol", usages: "client" });
  const client = () => new ClientCertVerifier([], parseCertBundle(root.certPem));
  const now = new Date();

  test("leaf + intermediate verifies up to the root; leaf + two intermediates too, in either order", async () => {
    expect(await client().classify([der(leaf.certPem), der(inter.certPem)], now)).toEqual({ source: "client", commonName: "bob", organizations: ["devs"] });
    expect((await client().classify([der(deep.certPem), der(inter2.certPem), der(inter.certPem)], now)).source).toBe("client");
    expect((await client().classify([der(deep.certPem), der(inter.certPem), der(inter2.certPem)], now)).source).toBe("client");
    // The root sent along as well changes nothing.
    expect((await client().classify([der(leaf.certPem), der(inter.certPem), der(root.certPem)], now)).source).toBe("client");
  });

  test("an intermediate in the CA bundle verifies a leaf sent alone; the root alone does not", async () => {
    const byIntermediate = new ClientCertVerifier([], parseCertBundle(inter.certPem));
    expect((await byIntermediate.classify(der(leaf.certPem), now)).source).toBe("client");
    expect(reason(await client().classify(der(leaf.certPem), now))).toContain('signed by unknown authority (issuer "CN=client-intermediate")');
  });

  test("the front-proxy authority verifies chains the same way", async () => {
    const v = new ClientCertVerifier(parseCertBundle(root.certPem), []);
    const proxy = await issueCertificate({ ca: inter, cn: "front-proxy-client", usages: "client" });
    expect(await v.classify([der(proxy.certPem), der(inter.certPem)], now)).toEqual({ source: "requestheader", commonName: "front-proxy-client", organizations: [] });
  });

  test("an expired intermediate refuses the chain, naming it", async () => {
    const old = await createIntermediateCA({ parent: root, cn: "old-intermediate", validity: { notBefore: new Date(now.getTime() - 3 * HOUR), notAfter: new Date(now.getTime() - HOUR) } });
    const l = await issueCertificate({ ca: old, cn: "dave", usages: "client" });
    expect(reason(await client().classify([der(l.certPem), der(old.certPem)], now))).toContain('"CN=old-intermediate" expired at');
  });

  test("a server-only leaf is refused for client authentication", async () => {
    const server = await issueCertificate({ ca: inter, cn: "web", usages: "server" });
    expect(reason(await client().classify([der(server.certPem), der(inter.certPem)], now))).toContain('"CN=web" is not valid for client authentication');
  });

  test("a chain through a non-CA certificate is refused: a leaf cannot sign another leaf", async () => {
    const signer = await issueCertificate({ ca: inter, cn: "not-a-ca", usages: "client" });
    const forged = await issueCertificate({ ca: { subject: "CN=not-a-ca", ...signer }, cn: "admin", organizations: ["system:masters"], usages: "client" });
    expect(reason(await client().classify([der(forged.certPem), der(signer.certPem), der(inter.certPem)], now))).toContain(
      '"CN=not-a-ca" is not authorized to sign other certificates',
    );
  });

  test("a path length constraint is enforced", async () => {
    const capped = await createIntermediateCA({ parent: root, cn: "capped", pathLength: 0 });
    const below = await createIntermediateCA({ parent: capped, cn: "below-capped" });
    const l = await issueCertificate({ ca: below, cn: "erin", usages: "client" });
    expect(reason(await client().classify([der(l.certPem), der(below.certPem), der(capped.certPem)], now))).toContain(
      '"CN=capped" allows 0 intermediate(s) below it, the chain has 1',
    );
  });

  test("an unrelated chain (another root's intermediate) is refused as unknown authority", async () => {
    const otherRoot = await createCA("client-root"); // same name, different key
    const otherInter = await createIntermediateCA({ parent: otherRoot, cn: "client-intermediate" });
    const l = await issueCertificate({ ca: otherInter, cn: "bob", usages: "client" });
    expect(reason(await client().classify([der(l.certPem), der(otherInter.certPem)], now))).toContain("signed by unknown authority");
    // Nor does the real intermediate vouch for a leaf the impostor signed.
    expect((await client().classify([der(l.certPem), der(inter.certPem)], now)).source).toBe("rejected");
  });
});
