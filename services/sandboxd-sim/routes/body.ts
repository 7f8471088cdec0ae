// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Request decoding with sandboxd's split (sandboxd.md §1): bodies are capped at 1 MiB; an oversize or undecodable
// body is `400 invalid request body`; claim-style bodies ignore unknown top-level fields (the schemas strip them);
// strict bodies (PUT /v1/pools) name the offending field: `400 invalid request body: unknown field "x"`.
import type { Context } from "hono";
import type { z } from "zod";
import { invalidBody, SimError } from "../errors.ts";
import { bearerOf } from "../auth.ts";
import { MAX_REQUEST_BODY_BYTES } from "#shared/sandboxd/index.ts";

/** What the HTTP layer read off the socket before routing (bodies are read once, capped). */
export interface RawRequest {
  body: Uint8Array;
  tooLarge: boolean;
  /** True when the request arrived as an HTTP/1.1 Upgrade the server can hand over (ports relay). */
  upgradable: boolean;
}

export type SimEnv = { Bindings: { raw?: RawRequest } };
export type SimContext = Context<SimEnv>;

export function bearer(c: SimContext): string | undefined {
  return bearerOf(c.req.header("authorization"));
}

async function rawBody(c: SimContext): Promise<{ body: Uint8Array; tooLarge: boolean }> {
  if (c.env?.raw) return c.env.raw;
  // In-process use (app.request) has no socket layer: read and cap here.
  const buf = new Uint8Array(await c.req.arrayBuffer());
  return { body: buf, tooLarge: buf.byteLength > MAX_REQUEST_BODY_BYTES };
}

/** The decoded JSON value; `undefined` for an empty body. Oversize or malformed -> 400 invalid request body. */
export async function readJson(c: SimContext): Promise<unknown> {
  const { body, tooLarge } = await rawBody(c);
  if (tooLarge) throw invalidBody();
  const text = new TextDecoder().decode(body);
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw invalidBody();
  }
}

function describe(issue: z.core.$ZodIssue): string {
  if (issue.code === "unrecognized_keys") return `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(", ")}`;
  const path = issue.path.map(String).join(".");
  return path ? `${path}: ${issue.message}` : issue.message;
}

export interface DecodeOptions {
  /** An absent body decodes as `{}` (renew, fork of a bare request…). */
  optional?: boolean;
  /** Top-level members whose failure is reported with this prefix instead of `invalid request body:`. */
  prefixes?: Record<string, string>;
}

export async function decode<S extends z.ZodType>(c: SimContext, schema: S, o: DecodeOptions = {}): Promise<z.infer<S>> {
  let v = await readJson(c);
  if (v === undefined) {
    if (!o.optional) throw invalidBody();
    v = {};
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw invalidBody();
  const r = schema.safeParse(v);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const top = String(issue.path[0] ?? "");
  const prefix = o.prefixes?.[top];
  if (prefix) throw new SimError(400, `${prefix}: ${describe(issue)}`);
  throw invalidBody(describe(issue));
}

export function json(c: SimContext, status: number, value: unknown): Response {
  return c.newResponse(JSON.stringify(value), status as 200, { "content-type": "application/json" });
}
