// A whole, bounded reply read through the framing parser (the e2b surface's envd calls: /init, /metrics, /envs):
// the head, then the body decoded as it arrives, capped at `maxBytes` of body. Incremental, so each byte is
// scanned once however the reply is split. A reply that ends before its framing says it is complete is an error.
import { FramingError } from "./error.ts";
import { ResponseHeadReader, type ResponseHead } from "./head.ts";
import { bodyDecoder, type BodyDecoder } from "./body.ts";
import { MAX_HEAD_BYTES } from "./limits.ts";

export interface WholeReply {
  status: number;
  headers: [string, string][];
  body: Buffer;
}

export class WholeReplyReader {
  private readonly headReader: ResponseHeadReader;
  private head: ResponseHead | undefined;
  private decoder: BodyDecoder | undefined;
  private readonly parts: Buffer[] = [];
  private size = 0;
  private wire = 0;

  constructor(
    method: string,
    private readonly maxBytes: number,
  ) {
    this.headReader = new ResponseHeadReader(method);
  }

  /** Feed bytes; the reply once complete, else undefined. Throws FramingError. */
  feed(chunk: Buffer): WholeReply | undefined {
    // Framing overhead is bounded too: chunk extensions cannot make a small body cost unbounded reading.
    this.wire += chunk.length;
    if (this.wire > MAX_HEAD_BYTES + 2 * this.maxBytes + 64 * 1024) throw new FramingError(`reply larger than ${this.maxBytes} bytes of body allow`, "body");
    if (!this.head) {
      const h = this.headReader.feed(chunk);
      if (!h) return undefined;
      this.head = h.head;
      this.decoder = bodyDecoder(h.head.framing);
      chunk = h.rest;
    }
    this.decoder!.feed(chunk, (s) => {
      this.size += s.length;
      if (this.size > this.maxBytes) throw new FramingError(`reply body larger than ${this.maxBytes} bytes`, "body");
      this.parts.push(Buffer.from(s));
    });
    return this.decoder!.done ? this.reply() : undefined;
  }

  /** The connection ended: the reply if its framing is complete (or close-delimited), else a FramingError. */
  end(): WholeReply {
    if (!this.head) this.headReader.end();
    this.decoder!.end();
    return this.reply();
  }

  private reply(): WholeReply {
    return { status: this.head!.status, headers: this.head!.headers, body: Buffer.concat(this.parts) };
  }
}
