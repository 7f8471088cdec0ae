export {
  type CertificateAuthority,
  type CertificateUsage,
  type IntermediateCAOptions,
  type IssueCertificateOptions,
  createCA,
  createIntermediateCA,
  issueCertificate,
} from "./ca.ts";
export { type CertFields, certFields } from "./cert-fields.ts";
export { type CertKeyPem, generateKeyPairPem, publicKeyToPem } from "./keys.ts";
export { KeyPairError, type LoadedKeyPair, loadKeyPair } from "./load.ts";
export { type SelfSignedOptions, selfSignedServingCert } from "./self-signed.ts";
export { type Validity, defaultValidity } from "./validity.ts";
// @peculiar/x509 lives in shared/x509, not here: whatever imports this index would evaluate it at start-up (idle
// RSS, docs/performance.md "Idle memory"); ca.ts loads it on first use.
