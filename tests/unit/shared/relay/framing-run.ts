// The framing parser run over a reply cut into reads, as the relay and the envd client feed it, with the outcome as
// plain data (so a Worker can post it back). Shared by framing.test.ts and framing.worker.ts.
import { FramingError, WholeReplyReader } from "#shared/relay/framing/index.ts";

export type Outcome = { ok: true; status: number; body: string } | { ok: false; framing: boolean; message: string };

/** Feed `chunks` in order, then end the connection (unless the reply completed first). */
export function runChunks(chunks: readonly Uint8Array[], method = "GET", maxBytes = 1 << 20): Outcome {
  const reader = new WholeReplyReader(method, maxBytes);
  try {
    for (const c of chunks) {
      const r = reader.feed(Buffer.from(c.buffer, c.byteOffset, c.byteLength));
      if (r) return { ok: true, status: r.status, body: r.body.toString("latin1") };
    }
    const r = reader.end();
    return { ok: true, status: r.status, body: r.body.toString("latin1") };
  } catch (err) {
    return { ok: false, framing: err instanceof FramingError, message: (err as Error).message };
  }
}

/** `wire` cut at `cuts` (any naturals, folded into range). */
export function split(wire: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (wire.length + 1)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const p of [...points, wire.length]) {
    out.push(wire.subarray(prev, p));
    prev = p;
  }
  return out;
}
