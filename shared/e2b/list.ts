// The list filters and paging of `GET /sandboxes` and `GET /v2/sandboxes` (docs/e2b.md "List"), as pure
// functions over already-rendered items so they can be tested without a fleet.
import { badRequest } from "./errors.ts";
import type { ListQuery, ListedSandbox } from "./schemas.ts";

export const MAX_PAGE = 100;

export interface ListFilters {
  states: Set<"running" | "paused"> | undefined;
  /** The image the `template` filter resolves to (alias first). */
  template: string | undefined;
  /** Epoch ms, truncated to the second. */
  startedAfter: number | undefined;
  metadata: Record<string, string> | undefined;
}

export interface Paging {
  limit: number;
  order: "asc" | "desc";
  after: { startedAt: string; sandboxID: string } | undefined;
}

function values(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(",")).map((s) => s.trim()).filter((s) => s !== "");
}

/** One decode as a form field does (`+` is a space), then the SDK's own encodeURIComponent layer. */
function decodeTwice(s: string): string {
  try {
    return decodeURIComponent(decodeURIComponent(s.replace(/\+/g, " ")));
  } catch {
    throw badRequest(`invalid metadata filter: ${JSON.stringify(s)} is not valid percent-encoding`);
  }
}

/** `k=v&k2=v2` as the SDK sends it (each side encodeURIComponent'd, then form-encoded). */
export function parseMetadataFilter(raw: string): Record<string, string> {
  // A Map, not an object literal: keys such as `__proto__` or `constructor` are ordinary metadata keys here.
  const out = new Map<string, string>();
  for (const pair of raw.split("&")) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    if (eq < 0) throw badRequest(`invalid metadata filter: pair ${JSON.stringify(pair)} has no "="`);
    const key = decodeTwice(pair.slice(0, eq));
    if (key === "") throw badRequest("invalid metadata filter: empty key");
    if (out.has(key)) throw badRequest(`invalid metadata filter: key ${JSON.stringify(key)} repeated`);
    out.set(key, decodeTwice(pair.slice(eq + 1)));
  }
  // fromEntries defines own properties, so even `__proto__` stays a key.
  return Object.fromEntries(out);
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

export function parseFilters(q: ListQuery, resolveTemplate: (t: string) => string): ListFilters {
  const stateValues = values(q.state);
  for (const s of stateValues) if (s !== "running" && s !== "paused") throw badRequest(`unknown state "${s}"`);
  let startedAfter: number | undefined;
  if (q.startedAfter !== undefined && q.startedAfter !== "") {
    const ms = RFC3339.test(q.startedAfter) ? Date.parse(q.startedAfter) : NaN;
    if (Number.isNaN(ms)) throw badRequest(`startedAfter: ${JSON.stringify(q.startedAfter)} is not an RFC 3339 time`);
    startedAfter = Math.floor(ms / 1000) * 1000;
  }
  return {
    states: stateValues.length ? new Set(stateValues as ("running" | "paused")[]) : undefined,
    template: q.template ? resolveTemplate(q.template) : undefined,
    startedAfter,
    metadata: q.metadata !== undefined && q.metadata !== "" ? parseMetadataFilter(q.metadata) : undefined,
  };
}

export function encodePageToken(item: { startedAt: string; sandboxID: string }): string {
  return Buffer.from(`${item.startedAt} ${item.sandboxID}`).toString("base64url");
}

export function decodePageToken(token: string): { startedAt: string; sandboxID: string } {
  const text = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, "base64url").toString("utf8") : "";
  const sp = text.indexOf(" ");
  const startedAt = sp > 0 ? text.slice(0, sp) : "";
  const sandboxID = sp > 0 ? text.slice(sp + 1) : "";
  if (!RFC3339.test(startedAt) || !/^[a-z0-9_-]+$/i.test(sandboxID)) throw badRequest("invalid nextToken");
  return { startedAt, sandboxID };
}

export function parsePaging(q: { limit?: string; order?: string; nextToken?: string }): Paging {
  let limit = MAX_PAGE;
  if (q.limit !== undefined) {
    limit = /^\d{1,4}$/.test(q.limit) ? Number(q.limit) : NaN;
    if (!(limit >= 1 && limit <= MAX_PAGE)) throw badRequest(`limit must be between 1 and ${MAX_PAGE}`);
  }
  const order = q.order === undefined || q.order === "" ? "desc" : q.order;
  if (order !== "asc" && order !== "desc") throw badRequest(`order must be "asc" or "desc", got ${JSON.stringify(order)}`);
  return { limit, order, after: q.nextToken ? decodePageToken(q.nextToken) : undefined };
}

export function matches(item: ListedSandbox, f: ListFilters): boolean {
  if (f.states && !f.states.has(item.state)) return false;
  if (f.template !== undefined && item.templateID !== f.template) return false;
  if (f.startedAfter !== undefined && Date.parse(item.startedAt) < f.startedAfter) return false;
  if (f.metadata) {
    const md = item.metadata ?? {};
    for (const [k, v] of Object.entries(f.metadata)) if (!Object.hasOwn(md, k) || md[k] !== v) return false;
  }
  return true;
}

const cmp = (a: { startedAt: string; sandboxID: string }, b: { startedAt: string; sandboxID: string }): number => {
  const t = Date.parse(a.startedAt) - Date.parse(b.startedAt);
  if (t !== 0) return t;
  return a.sandboxID < b.sandboxID ? -1 : a.sandboxID > b.sandboxID ? 1 : 0;
};

/** Sort by (startedAt, sandboxID), drop everything up to and including the token, cut the page. */
export function page(items: readonly ListedSandbox[], p: Paging): { items: ListedSandbox[]; nextToken: string | undefined } {
  const dir = p.order === "asc" ? 1 : -1;
  const sorted = [...items].sort((a, b) => dir * cmp(a, b));
  const rest = p.after ? sorted.filter((it) => dir * cmp(it, p.after!) > 0) : sorted;
  const out = rest.slice(0, p.limit);
  return { items: out, nextToken: rest.length > p.limit ? encodePageToken(out[out.length - 1]!) : undefined };
}
