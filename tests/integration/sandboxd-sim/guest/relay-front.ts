// Test scaffolding: the smallest front that lets the stock e2b SDK (with E2B_SANDBOX_URL-style routing) reach a
// simulated sandbox only through the node's ports relay, the way the envd proxy does (envd-proxy.md §7): read
// `E2b-Sandbox-Id`/`E2b-Sandbox-Port`, open `GET /v1/sandboxes/{id}/ports/{port}` with `Upgrade: tcp` and the
// claim token (the root token for a signed /files URL without X-Access-Token), then send the client's request
// over the upgraded socket as HTTP/1.1 and stream the answer back. No token derivation, no inventory: the proxy
// itself has its own tests; this only proves the guest works behind the relay.
import http from "node:http";
import type { Duplex } from "node:stream";

const HOP = new Set(["connection", "keep-alive", "upgrade", "proxy-connection", "te", "trailer", "transfer-encoding", "host"]);

export interface RelayFront {
  url: string;
  stop(): Promise<void>;
}

export interface FrontRoute {
  claimId: string;
  claimToken: string;
}

export async function startRelayFront(nodeUrl: string, rootToken: string, route: (publicId: string) => FrontRoute | undefined): Promise<RelayFront> {
  const server = http.createServer((req, res) => {
    const id = String(req.headers["e2b-sandbox-id"] ?? "");
    const port = String(req.headers["e2b-sandbox-port"] ?? "");
    const r = route(id);
    if (!r || !/^\d+$/.test(port)) {
      res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ code: 400, message: "no sandbox in the request" }));
      return;
    }
    const signed = !req.headers["x-access-token"] && (req.url ?? "").startsWith("/files?") && (req.url ?? "").includes("signature=");
    const up = http.request(`${nodeUrl}/v1/sandboxes/${r.claimId}/ports/${port}`, {
      headers: { authorization: `Bearer ${signed ? rootToken : r.claimToken}`, upgrade: "tcp", connection: "Upgrade" },
    });
    up.on("upgrade", (_res, socket: Duplex, head: Buffer) => {
      if (head.length) socket.unshift(head);
      // A client that goes away takes the relay with it (a cancelled stream reaches the guest as a disconnect).
      res.on("close", () => socket.destroy());
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
      headers.host = `${port}-${id}.test`;
      const inner = http.request({ createConnection: () => socket as never, method: req.method, path: req.url, headers }, (ir) => {
        const out: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(ir.headers)) if (v !== undefined && !HOP.has(k)) out[k] = v;
        res.writeHead(ir.statusCode ?? 502, out);
        ir.pipe(res);
      });
      inner.on("error", () => res.destroy());
      req.pipe(inner);
    });
    up.on("response", (nr) => {
      // The node refused the relay: pass its status and body through.
      res.writeHead(nr.statusCode ?? 502, { "content-type": "application/json" });
      nr.pipe(res);
    });
    up.on("error", () => res.destroy());
    up.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
