// A raw-TCP guest that answers with the framing attacks of issue 17 (docs/envd-relay.md "Framing"), one per path,
// and records every request head it reads. Attached to a sandbox's port through the simulator's attachGuest.
import net from "node:net";

/** What each path answers, byte for byte. Connections stay open unless the reply says `close`. */
const REPLIES: Record<string, { wire: string; close: boolean }> = {
  "/negative-chunk": { wire: "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nZ\r\n-6\r\nQ", close: false },
  "/negative-length": { wire: "HTTP/1.1 200 OK\r\ncontent-length: -6\r\n\r\nQ", close: false },
  "/status-99": { wire: "HTTP/1.1 099 Low\r\ncontent-length: 0\r\n\r\n", close: false },
  "/status-600": { wire: "HTTP/1.1 600 High\r\ncontent-length: 2\r\n\r\nhi", close: false },
  "/short-body": { wire: "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello", close: true },
  "/unterminated": { wire: "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n", close: true },
  "/init": { wire: "HTTP/1.1 204 No Content\r\ncontent-length: 0\r\ncontent-length: 1\r\n\r\n", close: false },
  "/metrics": { wire: "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nZ\r\n-6\r\nQ", close: false },
  "/ok": { wire: "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", close: true },
};

export interface FramingGuest {
  port: number;
  /** Every request head read, as text. */
  heads: string[];
  stop(): Promise<void>;
}

export async function startFramingGuest(): Promise<FramingGuest> {
  const heads: string[] = [];
  const open = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    open.add(sock);
    sock.on("close", () => open.delete(sock));
    sock.on("error", () => undefined);
    let seen = "";
    let answered = false;
    sock.on("data", (c) => {
      seen += c.toString("latin1");
      const end = seen.indexOf("\r\n\r\n");
      if (answered || end < 0) return;
      answered = true;
      const head = seen.slice(0, end);
      heads.push(head);
      const path = head.split(" ")[1] ?? "/";
      const reply = REPLIES[path];
      if (!reply) {
        // Anything else: echo the head back, so a test can see which headers reached the guest.
        const body = JSON.stringify({ head });
        sock.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
        return;
      }
      if (reply.close) sock.end(reply.wire, "latin1");
      else sock.write(reply.wire, "latin1");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    heads,
    stop: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
