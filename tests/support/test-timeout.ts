/**
 * The per-test budget of a test that names none: integration tests start real peers (a kube-apiserver takes several
 * seconds on 2 cores), and a loaded machine stretches that. A test that can legitimately take longer names its own.
 */
export const SUITE_TEST_TIMEOUT_MS = 60_000;
