// services/sandbox-apiserver/serving — the folder's front door: what other folders may import from it.
export { loadAuthSources, needsLookup, watchAuthSources } from "./auth-config.ts";
export { Authenticator, identityHeaderNames } from "./authn.ts";
export { Authorizer } from "./authz.ts";
export { servingCertificate } from "./certs.ts";
export { ACCEPTED_CIPHER_SUITES, cipherSuitesProblem } from "./cipher-suites.ts";
export { ClientCertVerifier, type PeerCert, parseCertBundle } from "./client-certs.ts";
export { ApiserverMetrics } from "./metrics.ts";
export { observabilityRoutes } from "./observability.ts";
export { readBody } from "./body.ts";
export { type RequestInfo, forbiddenMessage, requestInfo } from "./request-info.ts";
export { startSecureServer } from "./secure-server.ts";
