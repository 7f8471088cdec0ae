// --tls-cipher-suites (docs/serving.md "Cipher suites"): the IANA names Go's crypto/tls and every kube component
// accept, translated to the OpenSSL names Bun's TLS (BoringSSL) takes in its `ciphers` option. Go's "insecure"
// suites (RC4, 3DES, CBC with SHA-256) are refused, not merely warned about as kube does: BoringSSL cannot offer
// most of them anyway, so honouring the flag would be impossible. TLS 1.3 suites cannot be chosen, in Go or here:
// their names are accepted and have no effect.

/** TLS 1.2 suites: IANA/Go name → OpenSSL name. The CHACHA20 ones have two Go spellings. */
const TLS12_SUITES: Readonly<Record<string, string>> = {
  TLS_RSA_WITH_AES_128_CBC_SHA: "AES128-SHA",
  TLS_RSA_WITH_AES_256_CBC_SHA: "AES256-SHA",
  TLS_RSA_WITH_AES_128_GCM_SHA256: "AES128-GCM-SHA256",
  TLS_RSA_WITH_AES_256_GCM_SHA384: "AES256-GCM-SHA384",
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: "ECDHE-ECDSA-AES128-SHA",
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: "ECDHE-ECDSA-AES256-SHA",
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: "ECDHE-RSA-AES128-SHA",
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: "ECDHE-RSA-AES256-SHA",
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: "ECDHE-ECDSA-AES128-GCM-SHA256",
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: "ECDHE-ECDSA-AES256-GCM-SHA384",
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: "ECDHE-RSA-AES128-GCM-SHA256",
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: "ECDHE-RSA-AES256-GCM-SHA384",
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305: "ECDHE-ECDSA-CHACHA20-POLY1305",
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-ECDSA-CHACHA20-POLY1305",
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305: "ECDHE-RSA-CHACHA20-POLY1305",
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-RSA-CHACHA20-POLY1305",
};

/** TLS 1.3 suites: always all enabled when TLS 1.3 is negotiated (not configurable in Go's crypto/tls either). */
const TLS13_SUITES = new Set(["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]);

/** Go's tls.InsecureCipherSuites(): accepted by kube with a warning, refused here. */
const INSECURE_SUITES = new Set([
  "TLS_RSA_WITH_RC4_128_SHA",
  "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
  "TLS_RSA_WITH_AES_128_CBC_SHA256",
  "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
  "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
  "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
  "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
  "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
]);

/** Every name the flag accepts, for --help and error messages. */
export const ACCEPTED_CIPHER_SUITES: readonly string[] = [...Object.keys(TLS12_SUITES), ...TLS13_SUITES];

/** The flag's check: a message naming the first name that cannot be honoured, or undefined. */
export function cipherSuitesProblem(names: readonly string[]): string | undefined {
  for (const name of names) {
    if (INSECURE_SUITES.has(name)) return `${name} is an insecure cipher suite and is not offered by this server`;
    if (!(name in TLS12_SUITES) && !TLS13_SUITES.has(name)) {
      return `unknown cipher suite ${JSON.stringify(name)} (accepted: ${ACCEPTED_CIPHER_SUITES.join(", ")})`;
    }
  }
  return undefined;
}

/** What the TLS server is given for a flag value (already checked). */
export interface CipherOptions {
  /** OpenSSL cipher list for TLS 1.2 and below; absent means the runtime defaults. */
  ciphers?: string;
  /** Set when only TLS 1.3 names were given: TLS 1.2 then has no suite, so only TLS 1.3 is offered (as in Go). */
  minVersion?: "TLSv1.3";
}

export function cipherOptions(names: readonly string[]): CipherOptions {
  if (names.length === 0) return {};
  const tls12 = [...new Set(names.filter((n) => n in TLS12_SUITES).map((n) => TLS12_SUITES[n]!))];
  return tls12.length ? { ciphers: tls12.join(":") } : { minVersion: "TLSv1.3" };
}
