export { kubeletBindHost } from "./bind.ts";
export { ACCESS_ALLOWED_TTL_MS, ACCESS_DENIED_TTL_MS, kubeletDelegation, REVIEW_BURST, REVIEW_QPS, TOKEN_AUTHENTICATED_TTL_MS, TOKEN_REJECTED_TTL_MS } from "./delegation.ts";
export { EMPTY_SUMMARY, type KubeletApiDeps, NOT_FOUND_BODY, createKubeletApp } from "./app.ts";
export { AUTHENTICATED_GROUP, type AuthnOutcome, bearerToken, KubeletAuthenticator, type PeerCert, type TokenReview } from "./authn.ts";
export { type AccessReview, type KubeletAttributes, KubeletAuthorizer, kubeletAttributes } from "./authz.ts";
export { forbidden, type GuardOptions, guardKubeletApi, type KubeletHandler, unauthorized } from "./guard.ts";
export { IDLE_TIMEOUT_SECONDS, type KubeletServer, MAX_BODY_BYTES, peerOf, type ServeKubeletOptions, TLS12_MINIMUM, serveKubeletApi } from "./serve.ts";
export { type KubeletTlsInput, type KubeletTlsPair, kubeletTlsPair, selfSignedSans } from "./tls.ts";
export { NOT_IMPLEMENTED } from "./unsupported.ts";
