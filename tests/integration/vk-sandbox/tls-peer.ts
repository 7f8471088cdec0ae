// A TLS client for the kubelet API tests (integration and e2e): connects to 127.0.0.1:port without verifying the
// chain, and reports what the server presented and the protocol it settled on.
import * as tls from "node:tls";

export function peer(port: number, o: tls.ConnectionOptions = {}): Promise<{ cert: tls.PeerCertificate; protocol: string | null }> {
  return new Promise((resolve, reject) => {
    const sock = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false, ...o }, () => {
      const out = { cert: sock.getPeerCertificate(), protocol: sock.getProtocol() };
      sock.end();
      resolve(out);
    });
    sock.on("error", reject);
  });
}
