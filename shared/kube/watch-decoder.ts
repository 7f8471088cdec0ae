// A watch response is a stream of JSON objects, one per line (the apiserver's JSON stream encoder ends each event
// with "\n"). Chunks split lines anywhere, including inside a multi-byte character, so decode incrementally.

export interface WatchEvent<T = unknown> {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: T;
}

const TYPES = new Set(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]);

/** Splits text chunks into complete lines; keeps the unfinished tail for the next chunk. */
export class LineSplitter {
  private buf = "";
  push(chunk: string): string[] {
    this.buf += chunk;
    const lines = this.buf.split("\n");
    this.buf = lines.pop()!;
    return lines.filter((l) => l.trim().length > 0);
  }
  /** The tail left when the stream ends (a last line without a newline), if any. */
  end(): string[] {
    const rest = this.buf.trim();
    this.buf = "";
    return rest ? [rest] : [];
  }
}

export class WatchDecodeError extends Error {
  override name = "WatchDecodeError";
}

export function parseWatchLine<T>(line: string): WatchEvent<T> {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    throw new WatchDecodeError(`watch: not JSON: ${line.slice(0, 200)}`);
  }
  const e = v as { type?: unknown; object?: unknown };
  if (typeof e !== "object" || e === null || typeof e.type !== "string" || !TYPES.has(e.type) || typeof e.object !== "object") {
    throw new WatchDecodeError(`watch: not a watch event: ${line.slice(0, 200)}`);
  }
  return e as WatchEvent<T>;
}

/**
 * Decodes a byte stream into watch events as they arrive. An abort of `signal` cancels the read in progress, so a
 * stop never waits on a quiet watch even if the transport does not tie its body to the signal.
 */
export async function* decodeWatchStream<T>(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<WatchEvent<T>> {
  const decoder = new TextDecoder();
  const lines = new LineSplitter();
  const reader = body.getReader();
  const onAbort = () => reader.cancel(signal?.reason).catch(() => {});
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const l of lines.push(decoder.decode(value, { stream: true }))) yield parseWatchLine<T>(l);
    }
    for (const l of lines.push(decoder.decode())) yield parseWatchLine<T>(l);
    for (const l of lines.end()) yield parseWatchLine<T>(l);
  } finally {
    signal?.removeEventListener("abort", onAbort);
    reader.cancel().catch(() => {});
  }
}
