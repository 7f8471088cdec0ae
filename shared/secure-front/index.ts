// shared/secure-front — a node:tls front for a Bun.serve app that must know the client's certificate (front.ts):
// both Kubernetes-facing secure ports (sandbox-apiserver's, vk-sandbox's kubelet API) stand behind it.
export { type SecureFront, type SecureFrontOptions, startSecureFront } from "./front.ts";
export { escapeHeaderValue, headerLines, type InternalHeaders, internalHeaders } from "./internal-headers.ts";
export { presentedChain } from "./peer-chain.ts";
export { type FramerOptions, MAX_HEAD_BYTES, type Refusal, RequestFramer } from "./request-framer.ts";
