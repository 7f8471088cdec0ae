// shared/http — what every listener of ours shares: entry.ts (request-target checks before a handler, the
// `error` handler, the `{code, message}` envelope), metrics-listener.ts (a listener serving only /metrics).
export { codeMessageEnvelope, guardRequests, requestTargetProblem, uncaughtErrorHandler, type Envelope, type TargetProblem } from "./entry.ts";
export { serveMetrics, startMetricsListener, type MetricsListen } from "./metrics-listener.ts";
