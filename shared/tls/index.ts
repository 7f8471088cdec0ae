export {
  type CertificateAuthority,
  type CertificateUsage,
  type IntermediateCAOptions,
  type IssueCertificateOptions,
  createCA,
  createIntermediateCA,
  issueCertificate,
} from "./ca.ts";
export { type CertKeyPem, generateKeyPairPem, publicKeyToPem } from "./keys.ts";
export { KeyPairError, type LoadedKeyPair, loadKeyPair } from "./load.ts";
export { type SelfSignedOptions, selfSignedServingCert } from "./self-signed.ts";
export { type Validity, defaultValidity } from "./validity.ts";
export { x509 } from "./x509.ts";
