// The headers a TLS front adds to each request it hands its internal listener (front.ts). Each front names its own
// (`x-<name>-connection`, `x-<name>-refused`); a client's own copies are dropped by the front, so the handler can
// trust them. Identity header values are escaped by the front because Fetch's Headers join repeated lines with ", ":
// escaping `%` and `,` inside each line keeps one value per line, as kube-apiserver reads them (a group
// `team,system:masters` stays one group).

export interface InternalHeaders {
  /** The connection's secret: which TLS connection (and so which peer) a request came in on. */
  readonly connection: string;
  /** Set instead of forwarding a request the front refused (`<code> <message>`); answered by the error renderer. */
  readonly refused: string;
  /** Both, lower-cased. */
  readonly all: ReadonlySet<string>;
}

/** The internal header names of the front called `name` (lower-case letters, digits and dashes). */
export function internalHeaders(name: string): InternalHeaders {
  if (!/^[a-z0-9]+(-[a-z0-9]+)*$/.test(name)) throw new Error(`secure front name "${name}" must be lower-case letters, digits and dashes`);
  const connection = `x-${name}-connection`;
  const refused = `x-${name}-refused`;
  return { connection, refused, all: new Set([connection, refused]) };
}

/** One header line's value, made safe to survive the ", " join. */
export function escapeHeaderValue(v: string): string {
  return v.replace(/[%,]/g, (c) => (c === "%" ? "%25" : "%2C"));
}

/** The lines' values again, from a joined (and escaped) header value; undefined or "" gives none. */
export function headerLines(joined: string | null | undefined): string[] {
  if (!joined) return [];
  return joined.split(",").map((v) => v.trim().replace(/%(25|2C)/gi, (_m, h: string) => (h === "25" ? "%" : ",")));
}
