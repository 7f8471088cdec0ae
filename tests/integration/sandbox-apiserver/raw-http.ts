// Raw HTTP/1.1 over TLS for tests that must send what fetch will not (repeated header lines, `OPTIONS *`, CONNECT,
// bare LFs, pipelined requests) and read every response the server writes until it closes the connection.
import tls from "node:tls";

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits a byte stream of HTTP/1.1 responses (Content-Length or chunked bodies). */
export function parseResponses(raw: string): RawAnswer[] {
  const out: RawAnswer[] = [];
  let rest = raw;
  while (rest.startsWith("HTTP/1.1 ")) {
    const end = rest.indexOf("\r\n\r\n");
    const lines = rest.slice(0, end).split("\r\n");
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(":")).toLowerCase()] = l.slice(l.indexOf(":") + 1).trim();
    rest = rest.slice(end + 4);
    let body = "";
    if (headers["content-length"] !== undefined) {
      const n = Number(headers["content-length"]);
      body = rest.slice(0, n);
      rest = rest.slice(n);
    } else if (headers["transfer-encoding"] === "chunked") {
      for (;;) {
        const lf = rest.indexOf("\r\n");
        const size = parseInt(rest.slice(0, lf), 16);
        rest = rest.slice(lf + 2);
        if (size === 0) {
          rest = rest.slice(2);
          break;
        }
        body += rest.slice(0, size);
        rest = rest.slice(size + 2);
      }
    }
    out.push({ status: Number(lines[0]!.split(" ")[1]), headers, body });
  }
  return out;
}

/** Writes `raw` (latin1) over TLS and resolves with every response once the server closes the connection. */
export function rawExchange(port: number, raw: string, cert?: { certPem: string; keyPem: string }): Promise<RawAnswer[]> {
  return new Promise((resolve, reject) => {
    const sock = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false, ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}) });
    let got = "";
    sock.setEncoding("latin1");
    sock.on("data", (d: string) => (got += d));
    sock.on("error", reject);
    sock.on("close", () => resolve(parseResponses(got)));
    sock.once("secureConnect", () => sock.write(Buffer.from(raw, "latin1")));
  });
}
