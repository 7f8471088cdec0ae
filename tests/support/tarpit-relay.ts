// An envd relay (shared/relay) on a loopback port over an empty fleet, with the failed-lookup tarpit set as a test
// needs it: every sandbox lookup fails, so the tests of the tarpit (the relay's early refusals, the junk loop) see
// only what the budget lets through.
import { createLogger } from "#shared/log/index.ts";
import { EnvdRelay, serveRelay, type RelayOptions } from "#shared/relay/index.ts";

export function serveTarpitRelay(o: { domain: string; envdSecret: string; tarpit: NonNullable<RelayOptions["tarpit"]> }): ReturnType<typeof Bun.serve> {
  const relay = new EnvdRelay({
    domain: o.domain,
    fleet: { nodes: () => [], ready: async () => undefined, stop: async () => undefined },
    envdSecret: o.envdSecret,
    rootToken: "root",
    namespace: "",
    guestHttp2: false,
    log: createLogger({ level: "error" }),
    tarpit: o.tarpit,
  });
  return serveRelay(relay, { address: "127.0.0.1:0", log: createLogger({ level: "error" }) });
}
