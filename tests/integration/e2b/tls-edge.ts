// A TLS edge in front of a simulated sandboxd, as a node with TLS is deployed (sandboxd speaks plain HTTP; TLS lives at
// an edge, and the node advertises the edge's https:// origin). docs/envd-relay.md "TLS nodes".
import net from "node:net";
import tls from "node:tls";

/**
 * A TLS-terminating edge: every TLS connection is spliced, as bytes, to the node's plain-HTTP listener (asked per
 * connection, so a node may start after the edge and advertise the edge's address).
 */
export interface Edge {
  port: number;
  /** TLS handshakes completed so far. */
  handshakes(): number;
  stop(): Promise<void>;
}

export function startEdge(cert: { certPem: string; keyPem: string }, upstreamPort: () => number): Promise<Edge> {
  let handshakes = 0;
  const open = new Set<net.Socket>();
  const server = tls.createServer({ cert: cert.certPem, key: cert.keyPem, ALPNProtocols: ["http/1.1"] }, (client) => {
    handshakes++;
    const up = net.connect({ host: "127.0.0.1", port: upstreamPort() });
    open.add(client).add(up);
    client.pipe(up).pipe(client);
    const close = () => {
      client.destroy();
      up.destroy();
      open.delete(client);
      open.delete(up);
    };
    client.on("error", close).on("close", close);
    up.on("error", close).on("close", close);
  });
  server.on("tlsClientError", () => undefined); // the refused cases end in a client-side alert
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as net.AddressInfo).port,
        handshakes: () => handshakes,
        stop: () =>
          new Promise<void>((done) => {
            for (const s of open) s.destroy();
            server.close(() => done());
          }),
      }),
    );
  });
}
