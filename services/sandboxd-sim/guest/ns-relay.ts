// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// Runs in a namespaced sandbox's network namespace (only that one), started by namespace.ts on first use: the node's ports relay
// reaches the sandbox's own loopback through it. It listens on a Unix socket in the sandbox's host directory;
// each connection sends "<port>\n", gets back "1" once 127.0.0.1:<port> (else [::1]:<port>) inside the
// sandbox answered or "0" when nothing listens, then carries raw bytes both ways (half-close kept).
// Standalone script: `bun ns-relay.ts <socket path>`; it imports nothing from the repository.
import net from "node:net";
import { rmSync } from "node:fs";

const socketPath = process.argv[2];
if (!socketPath) {
  process.stderr.write("usage: ns-relay.ts <socket path>\n");
  process.exit(2);
}

function dial(port: number, hosts: string[], done: (s: net.Socket | undefined) => void): void {
  const [host, ...rest] = hosts;
  if (!host) return done(undefined);
  const s = net.connect({ host, port, allowHalfOpen: true });
  s.once("connect", () => {
    s.removeAllListeners("error");
    done(s);
  });
  s.once("error", () => dial(port, rest, done));
}

const server = net.createServer({ allowHalfOpen: true }, (client) => {
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const nl = head.indexOf(10);
    if (nl < 0) {
      if (head.length > 16) client.destroy();
      return;
    }
    client.off("data", onData);
    client.pause();
    const port = Number(head.subarray(0, nl).toString());
    const rest = head.subarray(nl + 1);
    if (!Number.isInteger(port) || port < 1 || port > 65535) return void client.end("0");
    dial(port, ["127.0.0.1", "::1"], (up) => {
      if (!up) return void client.end("0");
      client.write("1");
      if (rest.length) up.write(rest);
      client.pipe(up);
      up.pipe(client);
      client.resume();
      up.on("error", () => client.destroy());
      client.on("error", () => up.destroy());
      client.on("close", () => up.destroy());
      up.on("close", () => client.destroy());
    });
  };
  client.on("data", onData);
  client.on("error", () => client.destroy());
});

rmSync(socketPath, { force: true });
server.listen(socketPath, () => process.stdout.write("listening\n"));
