// A raw HTTP/1.1 client over node:net for the request shapes fetch cannot send (CONNECT, the asterisk and absolute
// request-target forms, a bad Host, malformed escapes), and the checks every answer to them must pass: a 4xx, a JSON
// error envelope where the request reached the handler, and nothing of Bun's development error page.
import net from "node:net";
import { join } from "node:path";

export interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The whole answer as received (head and body). */
  raw: string;
}

/**
 * Send `head` (a request line and headers, CRLF-separated, without the blank line) and read one answer: complete
 * once the head and `Content-Length` bytes have arrived, or when the server closes. Rejects after `timeoutMs` with
 * what arrived, so a server that never answers fails the test with evidence instead of hanging it.
 */
export function rawRequest(port: number, head: string, timeoutMs = 10_000): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) return reject(err);
      resolve(parse(buf.toString("latin1")));
    };
    const timer = setTimeout(() => finish(new Error(`no complete answer within ${timeoutMs} ms to ${JSON.stringify(head.split("\r\n")[0])}; got ${JSON.stringify(buf.toString("latin1").slice(0, 300))}`)), timeoutMs);
    sock.on("data", (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const len = /\r\ncontent-length:\s*(\d+)/i.exec(buf.subarray(0, end).toString("latin1"));
      if (len && buf.length >= end + 4 + Number(len[1])) finish();
    });
    sock.on("error", (err) => (buf.length ? finish() : finish(err)));
    sock.on("close", () => finish());
    sock.write(`${head}\r\n\r\n`);
  });
}

function parse(text: string): RawReply {
  const end = text.indexOf("\r\n\r\n");
  const headText = end < 0 ? text : text.slice(0, end);
  const [statusLine, ...lines] = headText.split("\r\n");
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(":");
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1] ?? NaN), headers, body: end < 0 ? "" : text.slice(end + 4), raw: text };
}

const repoRoot = join(import.meta.dir, "..", "..", "..");

/**
 * What must never reach a client: Bun's development error page (HTML with the source excerpt and a stack) or any
 * source path, repository path or working directory. Returns the markers found.
 */
export function leaks(body: string): string[] {
  const markers = ["<!doctype", "<html", "bun.sh", "node_modules", repoRoot, process.cwd(), "/work/", ".ts:", "    at "];
  const lower = body.toLowerCase();
  return markers.filter((m) => lower.includes(m.toLowerCase()));
}

/** The `{code, message}` envelope of the relay and the e2b surface, or undefined when the body is not one. */
export function envelopeOf(body: string): { code: number; message: string } | undefined {
  try {
    const v = JSON.parse(body) as unknown;
    if (v && typeof v === "object" && typeof (v as { code?: unknown }).code === "number" && typeof (v as { message?: unknown }).message === "string") {
      return v as { code: number; message: string };
    }
  } catch {}
  return undefined;
}

/** The odd request shapes every server gets (a name, the head to send). `host` is a Host the server accepts. */
export function oddRequests(host: string): Array<[string, string]> {
  return [
    ["CONNECT in authority form", `CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443`],
    ["CONNECT in origin form", `CONNECT /x HTTP/1.1\r\nHost: ${host}`],
    ["an unparsable Host", `GET /a HTTP/1.1\r\nHost: a b`],
    ["a Host with an unclosed IPv6 bracket", `GET /a HTTP/1.1\r\nHost: [::1`],
    ["the absolute form naming another host", `GET http://elsewhere.example:99/probe?x=1 HTTP/1.1\r\nHost: ${host}`],
    ["a malformed percent escape in the path", `GET /a%zz/b%4 HTTP/1.1\r\nHost: ${host}`],
    ["a percent escape of a non-UTF-8 byte", `GET /%ff%fe HTTP/1.1\r\nHost: ${host}`],
  ];
}

/** The asterisk form: Bun's parser answers it with a bare 400 before any handler runs (docs/decisions.md). */
export const ASTERISK_FORMS: Array<[string, string]> = [
  ["OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x"],
  ["GET *", "GET * HTTP/1.1\r\nHost: x"],
];
