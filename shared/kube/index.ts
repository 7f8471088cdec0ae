// shared/kube — the Kubernetes client every binary uses (README.md in this folder: connection rules, request path,
// error verdicts). Enter here; the files behind it are this folder's business.
export { type ClientOptions, DEFAULT_TIMEOUT_MS, KubeClient, type ListResult, MAX_429_RETRIES, type Query, type RequestOptions, type WatchEvent } from "./client.ts";
export { connectionFromKubeconfigs, type KubeConnection, KubeConfigError, type Kubeconfig, loadKubeConnection, SERVICE_ACCOUNT_DIR } from "./connection.ts";
export {
  isAlreadyExists,
  isConflict,
  isForbidden,
  isGone,
  isInvalid,
  isNotFound,
  isStatus,
  isTooManyRequests,
  isTransportError,
  isUnauthorized,
  KubeApiError,
  type Status,
  type StatusDetails,
} from "./errors.ts";
export { EventRecorder, type EventRecorderOptions, type EventSink, type EventType, type InvolvedObject, kubeEventSink } from "./events.ts";
export { Informer, type InformerOptions } from "./informer.ts";
export { type Obj, objectKey, podKey, splitKey } from "./keys.ts";
export { DEFAULT_BURST, DEFAULT_QPS, limiterFromFlags, rateFromFlags, TokenBucket } from "./rate-limit.ts";
export * from "./resources.ts";
export {
  type AccessAttributes,
  AccessReviewer,
  type AccessReviewerOptions,
  type AccessVerdict,
  accessReviewSpec,
  REJECTED_TOKEN_CACHE_MAX_ENTRIES,
  REVIEW_CACHE_MAX_ENTRIES,
  ReviewCache,
  type ReviewedUser,
  TOKEN_REVIEW_BURST,
  TOKEN_REVIEW_MAX_IN_FLIGHT,
  TOKEN_REVIEW_QPS,
  TokenReviewer,
  type TokenReviewerOptions,
  type TokenVerdict,
} from "./reviews.ts";
export { type Indexers, Store } from "./store.ts";
export { BearerToken, bunTransport, type Transport, type TransportInit } from "./transport.ts";
export {
  backoffDelay,
  DEFAULT_BASE_DELAY_MS,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_DELAY_MS,
  type QueueRate,
  type RetryPolicy,
  WorkQueue,
  type WorkQueueOptions,
} from "./work-queue.ts";
