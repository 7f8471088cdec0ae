// Request bodies and query strings, validated with the route's zod schema (the same one /openapi.json shows).
// Bodies are JSON of at most 1 MiB whatever the Content-Type says. A required body that is empty or invalid, or any
// invalid optional body, is 400 `invalid request body: …` naming the field; a field a strict schema does not know
// (schemas.ts: create, pause, connect, resume, snapshot) is named as unknown, never dropped silently.
import type { z } from "@hono/zod-openapi";
import { badRequest } from "./errors.ts";

export const MAX_BODY_BYTES = 1024 * 1024;

interface Issue {
  path: readonly PropertyKey[];
  message: string;
  code?: string;
  keys?: readonly string[];
}

/** Issues named in one error (a 1 MiB body can hold ~100k invalid entries: naming each made a ~6 MB answer). */
const MAX_ISSUES = 10;
/** Characters of one issue's path (a key may be as long as the body) and of its message. */
const MAX_PATH_CHARS = 120;
const MAX_MESSAGE_CHARS = 200;

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s);

function describeOne(i: Issue): string {
  const at = clip(i.path.map((p) => clip(String(p), MAX_PATH_CHARS)).join("."), MAX_PATH_CHARS);
  if (i.code === "unrecognized_keys" && i.keys?.length) {
    const names = i.keys.slice(0, MAX_ISSUES).map((k) => JSON.stringify(at ? `${at}.${clip(k, MAX_PATH_CHARS)}` : clip(k, MAX_PATH_CHARS)).slice(0, MAX_PATH_CHARS));
    return `unknown field${names.length === 1 ? "" : "s"} ${names.join(", ")}: not a field this server serves in this request, so it is refused rather than ignored`;
  }
  const message = clip(i.message, MAX_MESSAGE_CHARS);
  return at ? `${at}: ${message}` : message;
}

/**
 * The first MAX_ISSUES of a client's items rendered and joined, then how many more there were: an error message names
 * a bounded number of what the client sent, however many it sent.
 */
export function nameFirst<T>(items: readonly T[], render: (item: T) => string, separator: string, beforeMore = separator): string {
  const named = items.slice(0, MAX_ISSUES).map(render).join(separator);
  return items.length > MAX_ISSUES ? `${named}${beforeMore}and ${items.length - MAX_ISSUES} more` : named;
}

/** The first MAX_ISSUES issues, each bounded, and how many more there were. */
const describe = (issues: readonly Issue[]): string => nameFirst(issues, describeOne, "; ");

async function readCapped(req: Request): Promise<string> {
  const declared = Number(req.headers.get("content-length") ?? NaN);
  if (declared > MAX_BODY_BYTES) throw badRequest(`invalid request body: larger than ${MAX_BODY_BYTES} bytes`);
  if (!req.body) return "";
  // A declared length (within the cap) frames the body: one native read. Chunked bodies are counted as they arrive.
  if (Number.isFinite(declared) && declared >= 0) return req.text();
  const reader = req.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_BODY_BYTES) {
      await reader.cancel();
      throw badRequest(`invalid request body: larger than ${MAX_BODY_BYTES} bytes`);
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString("utf8");
}

export async function readJsonBody<T extends z.ZodType>(req: Request, schema: T, required: boolean): Promise<z.infer<T>> {
  const text = (await readCapped(req)).trim();
  let value: unknown = {};
  if (text === "") {
    if (required) throw badRequest("invalid request body: empty");
  } else {
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw badRequest(`invalid request body: ${(err as Error).message}`);
    }
  }
  const r = schema.safeParse(value);
  if (!r.success) throw badRequest(`invalid request body: ${describe(r.error.issues)}`);
  return r.data;
}

/** Query parameters; a repeated parameter becomes an array (the schema decides whether that is allowed). */
export function readQuery<T extends z.ZodType>(req: Request, schema: T): z.infer<T> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of new URL(req.url).searchParams) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  const r = schema.safeParse(out);
  if (!r.success) throw badRequest(`invalid query: ${describe(r.error.issues)}`);
  return r.data;
}
