// The headers the TLS front adds to each request it hands the internal listener (docs/serving.md "Secure serving").
// A client's own copies are dropped by the front, so the handler can trust them. Identity header values are escaped
// by the front because Fetch's Headers join repeated lines with ", ": escaping `%` and `,` inside each line keeps one
// value per line, as kube-apiserver reads them (a group `team,system:masters` stays one group).

/** The connection's secret: which TLS connection (and so which verified certificate) a request came in on. */
export const CONNECTION_HEADER = "x-sandbox-apiserver-connection";
/** Set instead of forwarding a request the front refused (`<code> <message>`); answered as a Status. */
export const REFUSED_HEADER = "x-sandbox-apiserver-refused";

export const INTERNAL_HEADERS: ReadonlySet<string> = new Set([CONNECTION_HEADER, REFUSED_HEADER]);

/** One header line's value, made safe to survive the ", " join. */
export function escapeHeaderValue(v: string): string {
  return v.replace(/[%,]/g, (c) => (c === "%" ? "%25" : "%2C"));
}

/** The lines' values again, from a joined (and escaped) header value; undefined or "" gives none. */
export function headerLines(joined: string | null | undefined): string[] {
  if (!joined) return [];
  return joined.split(",").map((v) => v.trim().replace(/%(25|2C)/gi, (_m, h: string) => (h === "25" ? "%" : ",")));
}
