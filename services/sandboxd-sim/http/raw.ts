// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Writing an HTTP/1.1 response straight onto a socket: needed on the Upgrade path, where node:http has handed
// the socket over and no ServerResponse exists.
import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";

export function writeRawResponse(sock: Duplex, status: number, headers: Record<string, string>, body: string | Uint8Array = ""): void {
  const buf = typeof body === "string" ? Buffer.from(body) : Buffer.from(body);
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Unknown"}\r\n`;
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() !== "content-length") head += `${k}: ${v}\r\n`;
  head += `Content-Length: ${buf.length}\r\nConnection: close\r\n\r\n`;
  sock.end(Buffer.concat([Buffer.from(head), buf]));
}
