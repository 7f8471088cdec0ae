// A TCP forwarder between a client and one of the stack's listeners that notes which HTTP version each connection
// opened with, so the SDK matrix can say what went over the wire rather than what the client was asked to use
// (an SDK set to HTTP/2 speaks HTTP/1.1 to a plain-http URL unless it does prior-knowledge h2c). With `tls` it is a
// TLS edge instead, as a deployment puts in front of the stack: it terminates TLS, offering the ALPN protocols given,
// notes what was negotiated, and forwards the cleartext bytes (h2 then arrives as prior-knowledge h2c).
import net from "node:net";
import tls from "node:tls";

const H2_PREFACE = "PRI * HTTP/2.0\r\n";

export type WireProtocol = "h2c" | "http/1.1" | "h2 (TLS)" | "http/1.1 (TLS)" | "other";

export interface WireTapOptions {
  /** Terminate TLS with this certificate, offering `alpn` (default h2 then http/1.1). */
  tls?: { certPem: string; keyPem: string; alpn?: string[] };
}

export interface WireTap {
  /** `http://127.0.0.1:<port>`: hand this to the client instead of the listener's own URL. */
  url: string;
  /** The protocol each connection opened with so far, in order. */
  connections(): WireProtocol[];
  stop(): Promise<void>;
}

function classify(first: Buffer): WireProtocol {
  const head = first.subarray(0, 64).toString("latin1");
  if (head.startsWith(H2_PREFACE.slice(0, Math.min(head.length, H2_PREFACE.length)))) return "h2c";
  return /^[A-Z]+ \S+ HTTP\/1\.[01]\r?\n/.test(head) ? "http/1.1" : "other";
}

/** Forwards every connection on a free loopback port to `target` (`http://host:port`), byte for byte. */
export async function startWireTap(target: string, o: WireTapOptions = {}): Promise<WireTap> {
  const { hostname, port } = new URL(target);
  const seen: WireProtocol[] = [];
  const open = new Set<net.Socket>();
  const onClient = (client: net.Socket) => {
    const up = net.connect({ host: hostname, port: Number(port) });
    open.add(client).add(up);
    const close = () => {
      client.destroy();
      up.destroy();
      open.delete(client);
      open.delete(up);
    };
    if (client instanceof tls.TLSSocket) seen.push(client.alpnProtocol === "h2" ? "h2 (TLS)" : client.alpnProtocol === "http/1.1" ? "http/1.1 (TLS)" : "other");
    else client.once("data", (first: Buffer) => seen.push(classify(first)));
    client.pipe(up).pipe(client);
    client.on("error", close).on("close", close);
    up.on("error", close).on("close", close);
  };
  const server = o.tls
    ? tls.createServer({ cert: o.tls.certPem, key: o.tls.keyPem, ALPNProtocols: o.tls.alpn ?? ["h2", "http/1.1"] }, onClient)
    : net.createServer(onClient);
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", resolve));
  return {
    url: `${o.tls ? "https" : "http"}://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    connections: () => [...seen],
    stop: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
