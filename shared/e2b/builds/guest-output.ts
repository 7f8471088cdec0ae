// Parsers of the build guest's output (docs/e2b.md §6.2): Connect envelopes and log lines. The guest is an
// adversary that may trickle bytes one at a time or send one huge message, so each parser touches every byte a
// bounded number of times: no re-copy of what is pending, no re-scan of what was already scanned.

/** Largest Connect envelope read from the guest (envd sends output in chunks of a few KiB). */
export const MAX_ENVELOPE_BYTES = 1024 * 1024;
/** A partial line longer than this is logged as it stands. */
export const MAX_LINE_BYTES = 64 * 1024;

/** A protocol error of the guest's envd (or of the call to it). */
export class EnvdCallError extends Error {}

/** Splits a byte stream into lines; a partial line over MAX_LINE_BYTES is emitted as it stands (whole characters). */
export class LineSplitter {
  // The current line's bytes: one extra byte lets a cut look at the byte after the bound.
  private readonly line = Buffer.alloc(MAX_LINE_BYTES + 1);
  private len = 0;
  private readonly decoder = new TextDecoder();

  constructor(private readonly emit: (line: string) => void) {}

  push(bytes: Uint8Array): void {
    // A trickle (a few bytes a read) goes byte by byte: cheaper than a view and a copy per read.
    if (bytes.length <= 16) {
      for (let i = 0; i < bytes.length; i++) {
        const b = bytes[i]!;
        if (b === 10) this.flush();
        else {
          this.line[this.len++] = b;
          if (this.len > MAX_LINE_BYTES) this.cut();
        }
      }
      return;
    }
    let at = 0;
    while (at < bytes.length) {
      const nl = bytes.indexOf(10, at);
      const end = nl < 0 ? bytes.length : nl;
      // Copy the segment in pieces that fit; a full buffer emits its longest whole-character prefix.
      while (at < end) {
        const n = Math.min(end - at, this.line.length - this.len);
        this.line.set(bytes.subarray(at, at + n), this.len);
        this.len += n;
        at += n;
        if (this.len > MAX_LINE_BYTES) this.cut();
      }
      if (nl < 0) return;
      this.flush();
      at = nl + 1;
    }
  }

  /** A newline: the line without its `\r`. */
  private flush(): void {
    let n = this.len;
    if (n > 0 && this.line[n - 1] === 13) n--;
    this.emit(this.decoder.decode(this.line.subarray(0, n)));
    this.len = 0;
  }

  end(): void {
    if (this.len > 0) this.emit(this.decoder.decode(this.line.subarray(0, this.len)));
    this.len = 0;
  }

  private cut(): void {
    let cut = MAX_LINE_BYTES;
    // Back off over UTF-8 continuation bytes (10xxxxxx) so no character is split; at most 3 of them.
    while (cut > MAX_LINE_BYTES - 3 && (this.line[cut]! & 0xc0) === 0x80) cut--;
    this.emit(this.decoder.decode(this.line.subarray(0, cut)));
    this.line.copyWithin(0, cut, this.len);
    this.len -= cut;
  }
}

/** Parses Connect server-stream envelopes from a byte stream, each bounded; each byte is copied once. */
export class EnvelopeReader {
  private chunks: Uint8Array[] = [];
  private size = 0;
  /** The body length of the envelope being read, once its header is there. */
  private need: number | undefined;
  private flags = 0;
  /** The envelope being read is dropped as it arrives (never gathered nor decoded). */
  private skipping = false;
  /** Envelopes dropped unread so far. */
  skipped = 0;

  /**
   * The complete envelopes in `chunk` and before: [flags, json text]. Throws on an oversized one. With `skipOver`,
   * a message envelope (not the end-of-stream one) longer than that is dropped unread: output nobody wants costs
   * no copy, no decoding and no parse (the process's start and end events are far smaller).
   */
  feed(chunk: Uint8Array, skipOver?: number): [number, string][] {
    if (chunk.length) {
      this.chunks.push(chunk);
      this.size += chunk.length;
    }
    const out: [number, string][] = [];
    for (;;) {
      if (this.need === undefined) {
        if (this.size < 5) break;
        const head = this.take(5);
        const len = head.readUInt32BE(1);
        if (len > MAX_ENVELOPE_BYTES) throw new EnvdCallError(`envd sent a message of ${len} bytes (at most ${MAX_ENVELOPE_BYTES})`);
        this.flags = head[0]!;
        this.need = len;
        this.skipping = skipOver !== undefined && len > skipOver && (this.flags & 0x02) === 0;
      }
      if (this.skipping) {
        const n = Math.min(this.need, this.size);
        this.drop(n);
        this.need -= n;
        if (this.need > 0) break;
        this.skipped++;
        this.skipping = false;
        this.need = undefined;
        continue;
      }
      if (this.size < this.need) break;
      out.push([this.flags, this.take(this.need).toString("utf8")]);
      this.need = undefined;
    }
    return out;
  }

  /** Remove the first `n` buffered bytes (n <= size) without copying them. */
  private drop(n: number): void {
    let left = n;
    let i = 0;
    while (left > 0) {
      const c = this.chunks[i]!;
      if (c.length <= left) {
        left -= c.length;
        i++;
      } else {
        this.chunks[i] = c.subarray(left);
        left = 0;
      }
    }
    this.chunks = i ? this.chunks.slice(i) : this.chunks;
    this.size -= n;
  }

  get pending(): number {
    return this.size + (this.need !== undefined ? 5 : 0);
  }

  /** Remove and return the first `n` buffered bytes (n <= size). */
  private take(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    let got = 0;
    let i = 0;
    while (got < n) {
      const c = this.chunks[i]!;
      const k = Math.min(c.length, n - got);
      out.set(k === c.length ? c : c.subarray(0, k), got);
      got += k;
      if (k === c.length) i++;
      else this.chunks[i] = c.subarray(k);
    }
    this.chunks = i ? this.chunks.slice(i) : this.chunks;
    this.size -= n;
    return out;
  }
}

/**
 * Paces the reading of output nobody keeps (past the build's log cap): at most `bytesPerSecond` after a burst of
 * `burstBytes`, each parsed envelope costing `envelopeCost` bytes more (a flood of tiny messages costs a parse each).
 * A guest that honours backpressure (envd) then blocks its process on its writes; one that does not buffers in its
 * own memory, never in ours. Either way the thread this runs on spends a bounded share on one build's output.
 */
export class OutputPacer {
  /** When (monotonic ms) the work spent so far is paid for. */
  private paidUntil = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly bytesPerSecond: number,
    private readonly burstBytes: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Account `bytes` of work; the ms to wait before reading on (0: read on now). */
  spend(bytes: number): number {
    const t = this.now();
    this.paidUntil = Math.max(this.paidUntil, t - (this.burstBytes * 1000) / this.bytesPerSecond) + (bytes * 1000) / this.bytesPerSecond;
    return Math.max(0, this.paidUntil - t);
  }
}

/** Past the log cap, output is read at most this fast (the bytes on the wire, base64 and envelopes included). */
export const DISCARD_BYTES_PER_SECOND = 2 * 1024 * 1024;
/** And this much at once before the pace applies. */
export const DISCARD_BURST_BYTES = 512 * 1024;
/** What one envelope parsed past the cap counts for, on top of its bytes. */
export const DISCARD_ENVELOPE_COST = 1024;
/** Past the cap, message envelopes longer than this are dropped unread (an end event is under 200 bytes). */
export const DISCARD_SKIP_OVER = 1024;
