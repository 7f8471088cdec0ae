// Reading a request body under a cap (docs/serving.md "Limits"): a declared Content-Length over the cap is refused
// before a byte is read (the TLS front refuses it even earlier), and a chunked body is counted as it arrives, so no
// request makes the server buffer more than the cap.
import { ApiError } from "../api/index.ts";

function tooLarge(size: string, max: number): ApiError {
  return new ApiError(413, `the request body is ${size}, over the limit of ${max} bytes`, "RequestEntityTooLarge");
}

export async function readBody(req: Request, max: number): Promise<ArrayBuffer | undefined> {
  const declared = req.headers.get("content-length");
  if (declared !== null) {
    if (Number(declared) > max) throw tooLarge(`${declared} bytes`, max);
    return req.arrayBuffer(); // native, at most `max` bytes
  }
  if (!req.body) return undefined;
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const part of req.body) {
    total += part.byteLength;
    if (total > max) throw tooLarge(`over ${max} bytes (chunked)`, max);
    parts.push(part);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out.buffer;
}
