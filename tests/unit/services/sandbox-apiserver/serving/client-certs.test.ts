import { describe, expect, test } from "bun:test";
import { ClientCertVerifier, parseCertBundle } from "#services/sandbox-apiserver/serving/client-certs.ts";
import { createCA, issueCertificate } from "#shared/tls/index.ts";

/** The DER bytes of a one-certificate PEM, as a TLS peer presents them. */
const der = (pem: string) => new Uint8Array(Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ""), "base64"));
const HOUR = 3_600_000;

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
      expect((await v.classify(admin, now))?.source).toBe("client");
      expect(await v.classify(stranger, now)).toBeUndefined();
      expect(await v.classify(new Uint8Array([1, 2, 3]), now)).toBeUndefined();
    }
  });

  test("a kept verdict still honours the validity window", async () => {
    const v = new ClientCertVerifier(parseCertBundle(frontProxyCA.certPem), []);
    expect(await v.classify(aggregator, now)).toBeDefined();
    expect(await v.classify(aggregator, ten)).toBeUndefined();
    expect(await v.classify(aggregator, new Date(now.getTime() - 2 * HOUR))).toBeUndefined();
  });

  test("replacing the authorities drops every kept verdict", async () => {
    const v = new ClientCertVerifier(parseCertBundle(frontProxyCA.certPem), []);
    expect(await v.classify(aggregator, now)).toBeDefined();
    expect(await v.classify(stranger, now)).toBeUndefined();
    v.update(parseCertBundle(otherCA.certPem), []);
    expect(await v.classify(aggregator, now)).toBeUndefined();
    expect((await v.classify(stranger, now))?.commonName).toBe("mallory");
  });
});
