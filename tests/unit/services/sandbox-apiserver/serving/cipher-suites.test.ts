// The Go → OpenSSL suite translation behind --tls-cipher-suites (docs/serving.md "Cipher suites"). Every OpenSSL name
// we produce must be one Bun's TLS library knows, or the listener would refuse to start.
import { describe, expect, test } from "bun:test";
import { getCiphers } from "node:tls";
import { ACCEPTED_CIPHER_SUITES, cipherOptions, cipherSuitesProblem } from "#services/sandbox-apiserver/serving/cipher-suites.ts";

describe("cipher suite names", () => {
  test("every accepted TLS 1.2 name maps to a suite this runtime's TLS offers", () => {
    const known = new Set(getCiphers().map((c) => c.toUpperCase()));
    for (const name of ACCEPTED_CIPHER_SUITES) {
      const { ciphers } = cipherOptions([name]);
      if (ciphers === undefined) continue; // a TLS 1.3 name
      expect(known.has(ciphers)).toBe(true);
    }
  });

  test("a list keeps its order, drops duplicates, and ignores TLS 1.3 names when TLS 1.2 names are present", () => {
    expect(
      cipherOptions([
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
      ]),
    ).toEqual({ ciphers: "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305" });
    expect(cipherOptions(["TLS_AES_256_GCM_SHA384"])).toEqual({ minVersion: "TLSv1.3" });
    expect(cipherOptions([])).toEqual({});
  });

  test("unknown, OpenSSL-spelled and insecure names are problems naming the suite", () => {
    expect(cipherSuitesProblem(["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"])).toBeUndefined();
    expect(cipherSuitesProblem(["ECDHE-ECDSA-AES128-GCM-SHA256"])).toStartWith('unknown cipher suite "ECDHE-ECDSA-AES128-GCM-SHA256"');
    expect(cipherSuitesProblem(["TLS_RSA_WITH_AES_128_CBC_SHA256"])).toBe("TLS_RSA_WITH_AES_128_CBC_SHA256 is an insecure cipher suite and is not offered by this server");
  });
});
