// The front's keep-alive deadline (issue 17 leftover; docs/decisions.md "secure-front-keep-alive"): a kept-alive
// connection whose last response has ended and that sends nothing more is closed after KEEP_ALIVE_IDLE_MS, as the
// relay listener reaps its idle connections (shared/relay/idle.ts). The front sees only bytes, so it follows the
// internal server's responses with the framing parser the relay uses for guests (shared/framing): one head
// reader per response, then its body decoder, told each request's method by the request framer (a HEAD answer has
// no body). A watch's open response is never "ended", so it is never timed by this. A connection it cannot follow
// (an upgrade, pipelined requests, a close-delimited body, bytes it cannot parse) just gets no keep-alive deadline,
// as before.
import { bodyDecoder, ResponseHeadReader, type BodyDecoder } from "../framing/index.ts";

/** The relay listener's RELAY_IDLE_TIMEOUT_S: above the 60 s of common load balancers, so they close first. */
export const KEEP_ALIVE_IDLE_MS = 90_000;

const ignore = (): void => undefined;

/** Follows one connection's responses; `feed` says when one has ended and no request waits for another. */
export class ResponseTracker {
  private head: ResponseHeadReader | undefined;
  private body: BodyDecoder | undefined;
  private lost = false;

  /** `methods`: the methods of the requests forwarded and not yet answered, oldest first (the framer appends). */
  constructor(private readonly methods: string[]) {}

  /** False once the connection can no longer be followed (it then gets no keep-alive deadline). */
  get following(): boolean {
    return !this.lost;
  }

  /** Response bytes as sent to the client; true when they end a response and no other request is outstanding. */
  feed(chunk: Buffer): boolean {
    if (this.lost) return false;
    try {
      let data = chunk;
      if (!this.body) {
        if (!this.head) {
          const method = this.methods.shift();
          if (method === undefined) return this.lose(); // bytes no request asked for
          this.head = new ResponseHeadReader(method, { upgrade: true });
        }
        const got = this.head.feed(data);
        if (!got) return false;
        this.head = undefined;
        // After a 101 the bytes are another protocol's; a close-delimited body ends with the connection.
        if (got.head.status === 101 || got.head.framing.kind === "close") return this.lose();
        this.body = bodyDecoder(got.head.framing);
        data = got.rest;
      }
      this.body.feedRanges(data, ignore);
      if (!this.body.done) return false;
      this.body = undefined;
      // Pipelined: where this body ended inside `data` (the next head's start) is not known to the decoder.
      if (this.methods.length > 0) return this.lose();
      return true;
    } catch {
      return this.lose();
    }
  }

  private lose(): false {
    this.lost = true;
    this.head = undefined;
    this.body = undefined;
    return false;
  }
}
