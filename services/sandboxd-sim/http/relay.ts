// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The socket half of the ports relay: dial the guest upstream, answer `101 Switching Protocols`, then splice raw
// bytes both ways. Half-close is carried across: when one side ends its writes, the other side's write half is
// ended and reading continues. An upstream nobody listens on is `502 guest port unreachable`.
import net from "node:net";
import type { Duplex } from "node:stream";
import { writeRawResponse } from "./raw.ts";

const DIAL_TIMEOUT_MS = 10_000;

export function spliceToGuest(client: Duplex, head: Buffer, target: string, onDone: (outcome: number | "upgraded") => void): void {
  const i = target.lastIndexOf(":");
  const host = i > 0 ? target.slice(0, i) : "";
  const port = Number(target.slice(i + 1));
  const unreachable = () => {
    onDone(502);
    writeRawResponse(client, 502, { "content-type": "application/json" }, JSON.stringify({ error: "guest port unreachable" }));
  };
  if (!host || !Number.isInteger(port) || port <= 0) return unreachable();
  const upstream = net.connect({ host, port, allowHalfOpen: true });
  upstream.setTimeout(DIAL_TIMEOUT_MS, () => upstream.destroy(new Error("dial timeout")));
  let connected = false;
  upstream.once("error", () => {
    if (!connected) return unreachable();
    client.destroy();
  });
  upstream.once("connect", () => {
    connected = true;
    upstream.setTimeout(0);
    onDone("upgraded");
    client.write("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n");
    if (head.length) upstream.write(head);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("close", () => {
      if (!client.writableEnded) client.end();
    });
    client.on("close", () => upstream.destroy());
  });
}
