// shared/framing — the one HTTP/1.1 framing parser for every guest byte the product reads (docs/envd-relay.md
// "Framing"), also used by the secure front to see where its internal server's responses end (shared/secure-front
// keep-alive.ts): head.ts (response head), body.ts (Content-Length, chunked, close-delimited bodies), whole.ts (a
// whole bounded reply, for the envd client), error.ts (FramingError, the only error they throw), limits.ts (bounds).
export { FramingError, isFramingError } from "./error.ts";
export { ResponseHeadReader, framingOf, isValidStatus, parseContentLength, type BodyFraming, type HeadDone, type ResponseHead } from "./head.ts";
export { bodyDecoder, ChunkedDecoder, CloseDecoder, LengthDecoder, type BodyDecoder } from "./body.ts";
export { WholeReplyReader, type WholeReply } from "./whole.ts";
export * as limits from "./limits.ts";
