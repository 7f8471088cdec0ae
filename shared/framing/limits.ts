// The bounds of the framing parser (docs/envd-relay.md "Framing"). Each one caps what a guest can make the proxy
// hold or scan for one exchange; honest servers stay far below them.

/** Response head bytes, interim (1xx) heads included. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** Header lines in one head. */
export const MAX_HEADER_COUNT = 128;
/** Interim (1xx) heads before the final one. */
export const MAX_INTERIM_HEADS = 8;
/** Hex digits of a chunk size, leading zeros included (12 digits: 256 TiB, far inside a safe integer). */
export const MAX_CHUNK_SIZE_DIGITS = 12;
/** Bytes of chunk extensions on one chunk-size line (ignored, but scanned). */
export const MAX_CHUNK_EXT_BYTES = 4 * 1024;
/** Bytes of trailer section after the last chunk (discarded, but scanned). */
export const MAX_TRAILER_BYTES = 16 * 1024;
/** Decimal digits of Content-Length (15 digits stay below 2^53). */
export const MAX_LENGTH_DIGITS = 15;
