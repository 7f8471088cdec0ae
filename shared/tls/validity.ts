export interface Validity {
  notBefore: Date;
  notAfter: Date;
}

const HOUR_MS = 3_600_000;
const TEN_YEARS_MS = 10 * 365 * 24 * HOUR_MS;

/**
 * now−1h … now+10y. The hour of back-dating absorbs clock skew between the machine that mints the cert and the one
 * that checks it; ten years means a long-running node never meets an expiry nobody planned to rotate.
 */
export function defaultValidity(now: Date = new Date()): Validity {
  return { notBefore: new Date(now.getTime() - HOUR_MS), notAfter: new Date(now.getTime() + TEN_YEARS_MS) };
}
