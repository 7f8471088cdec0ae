// The one error a framing violation raises (docs/envd-relay.md "Framing"): the guest's bytes are not HTTP/1.1 as
// this parser accepts it. Callers end that exchange only (502 before the response head, a stream error after it).

export class FramingError extends Error {
  override name = "FramingError";
  constructor(
    message: string,
    /** Where the violation was found: in the response head, or in the body after the head was answered. */
    readonly phase: "head" | "body",
  ) {
    super(message);
  }
}

export const isFramingError = (err: unknown): err is FramingError => err instanceof FramingError;
