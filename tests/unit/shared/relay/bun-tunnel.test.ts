// The Bun-socket ports relay against a raw TCP peer that plays the node: the guest's first bytes arriving in the
// same packet as the 101 reach the HTTP/1.1 leg, a refusal keeps the node's status and message, and a node that
// hangs up mid-handshake is "unreachable" (the proxy maps both as for openTunnel, docs/envd-relay.md "Failures").
import { afterEach, expect, test } from "bun:test";
import type { TCPSocketListener } from "bun";
import { BunTunnel } from "#shared/relay/bun-tunnel.ts";
import { startHttp1 } from "#shared/relay/h1.ts";
import { TunnelRefused, TunnelUnreachable } from "#shared/relay/tunnel.ts";

let node: TCPSocketListener | undefined;
afterEach(() => node?.stop(true));

/** A fake node: on the Upgrade request head, `reply` answers (and may close). */
function fakeNode(reply: (head: string, write: (s: string) => void, close: () => void) => void): string {
  let seen = "";
  node = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(s, chunk) {
        seen += chunk.toString("latin1");
        if (seen.includes("\r\n\r\n")) reply(seen, (x) => void s.write(x), () => s.end());
      },
    },
  });
  return `127.0.0.1:${node.port}`;
}

const target = (address: string) => ({ address, claimId: "sb_x", port: 49983, token: "tok" });

test("guest bytes that come with the 101 are the start of the guest's response", async () => {
  let request = "";
  const address = fakeNode((head, write, close) => {
    request = head;
    // The 101 and the whole guest response in one write: the guest answers before the request is read.
    write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-g: 1\r\n\r\nhello");
    setTimeout(close, 20);
  });
  const t = await BunTunnel.open(target(address));
  expect(request).toStartWith("GET /v1/sandboxes/sb_x/ports/49983 HTTP/1.1\r\n");
  expect(request).toContain("Authorization: Bearer tok\r\n");
  const closed = new Promise<void>((resolve) => t.onClose(resolve));
  const { response, events } = startHttp1(t, {
    method: "GET",
    path: "/",
    authority: "49983-x.example",
    headers: {},
    body: null,
    onBytesIn: () => undefined,
    onBytesOut: () => undefined,
    signal: new AbortController().signal,
  });
  t.attach(events);
  const res = await response;
  expect(res.status).toBe(200);
  expect(res.headers.get("x-g")).toBe("1");
  expect(await res.text()).toBe("hello");
  await closed; // the whole body read: the tunnel is torn down
  expect(t.destroyed).toBe(true);
});

test("a refusal carries the node's status and message", async () => {
  const address = fakeNode((_h, write) => write('HTTP/1.1 409 Conflict\r\ncontent-type: application/json\r\ncontent-length: 26\r\n\r\n{"error":"sandbox paused"}'));
  const err = await BunTunnel.open(target(address)).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(TunnelRefused);
  expect((err as TunnelRefused).status).toBe(409);
  expect((err as TunnelRefused).nodeMessage).toBe("sandbox paused");
});

test("a node that hangs up mid-handshake, or cannot be dialled, is unreachable", async () => {
  const address = fakeNode((_h, _w, close) => close());
  expect(await BunTunnel.open(target(address)).catch((e: unknown) => e)).toBeInstanceOf(TunnelUnreachable);
  node!.stop(true);
  expect(await BunTunnel.open(target(address)).catch((e: unknown) => e)).toBeInstanceOf(TunnelUnreachable);
});

test("an aborted dial rejects as unreachable and leaves the socket closed", async () => {
  const address = fakeNode(() => undefined); // never answers
  const ctl = new AbortController();
  const p = BunTunnel.open(target(address), { signal: ctl.signal });
  setTimeout(() => ctl.abort(), 20);
  const err = await p.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(TunnelUnreachable);
  expect((err as Error).message).toContain("aborted");
});
