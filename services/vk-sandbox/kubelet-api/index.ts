export { EMPTY_SUMMARY, type KubeletApiDeps, NOT_FOUND_BODY, createKubeletApp } from "./app.ts";
export { type KubeletServer, type ServeKubeletOptions, TLS12_MINIMUM, serveKubeletApi } from "./serve.ts";
export { type KubeletTlsInput, type KubeletTlsPair, kubeletTlsPair, selfSignedSans } from "./tls.ts";
export { NOT_IMPLEMENTED } from "./unsupported.ts";
