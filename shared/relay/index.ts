// shared/relay — the envd relay (docs/envd-relay.md): route.ts (host/header routing), owners.ts (owner cache,
// inventory lookup, probes), tunnel.ts + bun-tunnel.ts (the node's ports relay), guest.ts + h1.ts (the streaming guest leg),
// http1.ts (the envd client's small exchanges), framing/ (the HTTP/1.1 parser for every guest byte),
// proxy.ts (the pipeline and failure mapping), answers.ts (the failure answers the SDKs branch on), limits.ts + limit-flags.ts (caps, budget, deadlines), metrics.ts,
// websocket.ts + ws-frames.ts (the WebSocket leg), server.ts (the listener and its request entry), idle.ts
// (the listener's idle timeout, held off while a request is answered), public-ports.ts (which credential opens
// which port), api-host.ts (api.{domain} handed to the e2b REST surface).
export { EnvdRelay, relayError, type RelayOptions } from "./proxy.ts";
export { relayEntry, serveRelay, stopRelay, RELAY_DRAIN_MS, type RelayListen } from "./server.ts";
export { RELAY_IDLE_TIMEOUT_S } from "./idle.ts";
export { routeFromHost, routeRequest, parsePort, isEnvdInternalPath, envdPathVerdict, isSignedFileUrl } from "./route.ts";
export { OwnerCache, OwnerResolver } from "./owners.ts";
export { isApiHost, upstreamApi, API_UPSTREAM_TIMEOUT_MS, type ApiHandler } from "./api-host.ts";
export { credentialOf, servesPublicly } from "./public-ports.ts";
export { type SmallReply, exchangeOverTunnel } from "./http1.ts";
export { BufferBudget, DEFAULT_RELAY_LIMITS, RelaySlots, type RelayLimitOptions } from "./limits.ts";
export { envdProxyRelayLimitFlags, relayLimitFlags, relayLimitsFrom } from "./limit-flags.ts";
// The build executor's streaming envd calls (shared/e2b/builds): a tunnel, then one HTTP/1.1 exchange through the framing parser.
export { openTunnel, type TunnelTarget } from "./tunnel.ts";
export { forwardHttp1Raw } from "./h1.ts";
