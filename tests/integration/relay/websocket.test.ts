// Scenario 33: a WebSocket to a user server on guest port 3000 goes through the relay: 101, then text and binary
// messages both ways (large ones too), pings answered, a close on either side reaching the other.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { DOMAIN, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";
import { until } from "#tests/support/wait.ts";

// Messages cross a real relay and a real socket pair (1 MiB among them): a ceiling for a loaded machine, not a budget.
const RELAYED_MS = 15_000;

let s: Stack;
let userServer: ReturnType<typeof Bun.serve>;
const closes: { code: number; reason: string }[] = [];
beforeAll(async () => {
  s = await startStack({ proxy: true });
  userServer = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req, server) {
      const proto = req.headers.get("sec-websocket-protocol") ?? undefined;
      if (server.upgrade(req, { data: { host: req.headers.get("host") }, ...(proto ? { headers: { "sec-websocket-protocol": proto.split(",")[0]!.trim() } } : {}) })) return undefined;
      return new Response("plain http", { status: 200 });
    },
    websocket: {
      open(ws) {
        ws.send(`hello from ${(ws.data as { host: string }).host}`);
      },
      message(ws, msg) {
        if (typeof msg === "string") {
          if (msg === "bye") return ws.close(4000, "server says bye");
          ws.send(`echo:${msg}`);
        } else ws.send(new Uint8Array([...new Uint8Array(msg).subarray(0, 4), msg.byteLength & 0xff]));
      },
      close(_ws, code, reason) {
        closes.push({ code, reason });
      },
    },
  });
});
afterAll(async () => {
  userServer.stop(true);
  await s.stop();
});

function open(url: string, headers: Record<string, string>, protocols?: string[]): Promise<{ ws: WebSocket; messages: (string | ArrayBuffer)[]; closed: Promise<CloseEvent> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, ...(protocols ? { protocols } : {}) } as unknown as string[]);
    ws.binaryType = "arraybuffer";
    const messages: (string | ArrayBuffer)[] = [];
    const closed = new Promise<CloseEvent>((r) => ws.addEventListener("close", (e) => r(e)));
    ws.addEventListener("message", (e) => messages.push(e.data as string | ArrayBuffer));
    ws.addEventListener("open", () => resolve({ ws, messages, closed }));
    ws.addEventListener("error", (e) => reject(new Error(`websocket error: ${String((e as ErrorEvent).message ?? e)}`)));
  });
}

test("33: text and binary both ways, a 1 MiB message, the guest's close reaching the client", async () => {
  const sbx = await Sandbox.create("base", sdkOpts(s));
  s.cluster.nodes[0]!.attachGuest(sbx.sandboxId.replace("sb-", "sb_"), 3000, userServer.port!);
  const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  const host = `3000-${sbx.sandboxId}.${DOMAIN}`;
  const { ws, messages, closed } = await open(`${s.proxyUrl!.replace("http", "ws")}/socket`, { host, "x-access-token": token });
  await until(() => messages.length === 1, "message 1", RELAYED_MS);
  expect(messages[0]).toBe(`hello from ${host}`);
  ws.send("ping-1");
  await until(() => messages.length === 2, "message 2", RELAYED_MS);
  expect(messages[1]).toBe("echo:ping-1");
  const big = new Uint8Array(1024 * 1024).fill(7);
  big.set([1, 2, 3, 4]);
  ws.send(big);
  await until(() => messages.length === 3, "message 3", RELAYED_MS);
  expect([...new Uint8Array(messages[2] as ArrayBuffer)]).toEqual([1, 2, 3, 4, 0]);
  const longText = "x".repeat(200_000);
  ws.send(longText);
  await until(() => messages.length === 4, "message 4", RELAYED_MS);
  expect(messages[3]).toBe(`echo:${longText}`);
  ws.send("bye");
  const ev = await closed;
  expect(ev.code).toBe(4000);
  expect(ev.reason).toBe("server says bye");
  await sbx.kill();
});

test("33: a client close reaches the guest; no token => upgraded on a public sandbox, 401 before any upgrade on a private one; a plain-HTTP guest answers its status", async () => {
  const sbx = await Sandbox.create("base", sdkOpts(s));
  s.cluster.nodes[0]!.attachGuest(sbx.sandboxId.replace("sb-", "sb_"), 3000, userServer.port!);
  const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  const host = `3000-${sbx.sandboxId}.${DOMAIN}`;
  const before = closes.length;
  const { ws, messages } = await open(`${s.proxyUrl!.replace("http", "ws")}/socket`, { host, "x-access-token": token });
  await until(() => messages.length === 1, "message 1", RELAYED_MS);
  ws.close(4100, "client done");
  await until(() => closes.length === before + 1, "the close at the guest", RELAYED_MS);
  expect(closes.at(-1)).toEqual({ code: 4100, reason: "client done" });
  // No token: a public sandbox's user port upgrades (as on e2b cloud); one created with allowPublicTraffic: false
  // is refused before any upgrade reaches its guest.
  const asOpened = (p: Promise<unknown>) => p.then((x) => ((x as { ws: WebSocket }).ws.close(), "opened"), () => "refused");
  expect(await asOpened(open(`${s.proxyUrl!.replace("http", "ws")}/socket`, { host }))).toBe("opened");
  const priv = await Sandbox.create("base", { ...sdkOpts(s), network: { allowPublicTraffic: false } });
  s.cluster.nodes[0]!.attachGuest(priv.sandboxId.replace("sb-", "sb_"), 3000, userServer.port!);
  const privHost = `3000-${priv.sandboxId}.${DOMAIN}`;
  expect(await asOpened(open(`${s.proxyUrl!.replace("http", "ws")}/socket`, { host: privHost }))).toBe("refused");
  await priv.kill();
  // The same path over plain HTTP is just relayed.
  const plain = await fetch(`${s.proxyUrl}/socket`, { headers: { host, "x-access-token": token } });
  expect(await plain.text()).toBe("plain http");
  await sbx.kill();
});
