// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The socket half of the ports relay: dial the guest upstream, answer `101 Switching Protocols`, then splice raw
// bytes both ways. Half-close is carried across: when one side ends its writes, the other side's write half is
// ended and reading continues. An upstream nobody listens on is `502 guest port unreachable`.
// A target `unix:<socket>:<port>` is a namespaced sandbox's own loopback (guest/ns-relay.ts inside it): the port
// is sent as "<port>\n" and the relay inside answers "1" (connected) or "0" (nothing listens) before any data.
import net from "node:net";
import type { Duplex } from "node:stream";
import { writeRawResponse } from "./raw.ts";

const DIAL_TIMEOUT_MS = 10_000;

/** `onClose`: called once when a spliced relay ends (either side closed); never for a relay that did not open. */
export function spliceToGuest(client: Duplex, head: Buffer, target: string, onDone: (outcome: number | "upgraded") => void, onClose: () => void = () => {}, protocol = "tcp"): void {
  const i = target.lastIndexOf(":");
  const host = i > 0 ? target.slice(0, i) : "";
  const port = Number(target.slice(i + 1));
  const unreachable = () => {
    onDone(502);
    writeRawResponse(client, 502, { "content-type": "application/json" }, JSON.stringify({ error: "guest port unreachable" }));
  };
  if (!host || !Number.isInteger(port) || port <= 0) return unreachable();
  if (host.startsWith("unix:")) return void viaSandboxRelay(host.slice(5), port, unreachable, (up, rest) => splice(client, head, up, rest, onDone, onClose, protocol));
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
    splice(client, head, upstream, Buffer.alloc(0), onDone, onClose, protocol);
  });
}

function splice(client: Duplex, head: Buffer, upstream: net.Socket, early: Buffer, onDone: (outcome: number | "upgraded") => void, onClose: () => void, protocol: string): void {
  onDone("upgraded");
  let closed = false;
  const closeOnce = () => {
    if (closed) return;
    closed = true;
    onClose();
  };
  client.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${protocol}\r\n\r\n`);
  if (early.length) client.write(early);
  if (head.length) upstream.write(head);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on("error", () => upstream.destroy());
  upstream.on("close", () => {
    closeOnce();
    if (!client.writableEnded) client.end();
  });
  client.on("close", () => {
    closeOnce();
    upstream.destroy();
  });
}

/**
 * Dial a port on a sandbox's own loopback through the relay inside it; `ok` gets the socket and any bytes past the
 * answer. The relay starts on a sandbox's first relayed connection, so a socket not there yet is retried until
 * the dial deadline.
 */
function viaSandboxRelay(path: string, port: number, unreachable: () => void, ok: (up: net.Socket, rest: Buffer) => void, deadline = Date.now() + DIAL_TIMEOUT_MS): void {
  const up = net.connect({ path, allowHalfOpen: true });
  up.setTimeout(DIAL_TIMEOUT_MS, () => up.destroy(new Error("dial timeout")));
  let answered = false;
  up.once("error", (e: NodeJS.ErrnoException) => {
    if (answered) return;
    if ((e.code === "ENOENT" || e.code === "ECONNREFUSED") && Date.now() < deadline) {
      answered = true;
      setTimeout(() => viaSandboxRelay(path, port, unreachable, ok, deadline), 20);
      return;
    }
    unreachable();
  });
  up.once("connect", () => up.write(`${port}\n`));
  const onData = (chunk: Buffer) => {
    answered = true;
    up.off("data", onData);
    up.pause();
    up.setTimeout(0);
    if (chunk[0] !== 0x31) {
      up.destroy();
      return unreachable();
    }
    up.on("error", () => {});
    ok(up, chunk.subarray(1));
    up.resume();
  };
  up.on("data", onData);
  up.once("end", () => {
    if (!answered) {
      answered = true;
      unreachable();
    }
  });
}
