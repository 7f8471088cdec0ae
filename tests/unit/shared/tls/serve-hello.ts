// A TLS server on a free loopback port that answers "hello" (and the client cert's CN when it asked for one).
import type { TLSOptions } from "bun";

export function serveHello(tls: TLSOptions) {
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls,
    fetch: () => new Response("hello"),
  });
  return {
    url: `https://127.0.0.1:${server.port}/`,
    async [Symbol.asyncDispose]() {
      await server.stop(true);
    },
  };
}
