// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Every request a node received, for assertions: method, path, query, route name, the kind of credential it
// carried (classified, never the secret itself), the decoded body, and how it ended.
import type { AuthKind } from "../auth.ts";

export interface RequestLogEntry {
  seq: number;
  /** Node clock time of arrival (ms). */
  at: number;
  node: string;
  method: string;
  path: string;
  query: Record<string, string[]>;
  route: string | null;
  auth: AuthKind;
  /** The tenant's name when auth is "tenant". */
  tenant?: string;
  /** Parsed JSON when the body was JSON, the text otherwise, undefined when empty. */
  body: unknown;
  /** HTTP status, or how the connection ended when a fault cut it. Filled in when the reply is written. */
  outcome?: number | "reset" | "hang" | "upgraded";
}

export class RequestLog {
  private seq = 0;
  readonly entries: RequestLogEntry[] = [];
  constructor(private readonly cap = 10_000) {}

  add(e: Omit<RequestLogEntry, "seq">): RequestLogEntry {
    const entry = { ...e, seq: ++this.seq };
    this.entries.push(entry);
    if (this.entries.length > this.cap) this.entries.shift();
    return entry;
  }
  clear(): void {
    this.entries.length = 0;
  }
  /** Entries for one route name (or a predicate). */
  find(pred: string | ((e: RequestLogEntry) => boolean)): RequestLogEntry[] {
    return this.entries.filter(typeof pred === "string" ? (e) => e.route === pred : pred);
  }
}

export function decodeLoggedBody(buf: Uint8Array): unknown {
  if (buf.byteLength === 0) return undefined;
  const text = new TextDecoder().decode(buf.byteLength > 65536 ? buf.subarray(0, 65536) : buf);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
