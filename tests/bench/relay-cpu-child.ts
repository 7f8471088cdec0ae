// One relay under test for the relay CPU A/B (relay-cpu.bench.ts), alone in its own process so its /proc CPU is
// the relay's only. It loads the relay from the tree given as argv[2] (this worktree or a checkout of an earlier
// revision), primes the owner the parent names, listens on loopback and prints one JSON line: {port, token}.
// argv[3] is the listener: "serve" (the tree's own serveRelay), or an ablation of this tree's listener:
// "idle0" (relayEntry, Bun's idleTimeout 0), "raw" (relay.fetch alone, idleTimeout 0). relay-cpu.bench.ts also
// starts a relay in its own process through startRelayFrom (its "inproc" legs, the e2b bench's arrangement).
import { join } from "node:path";
import type { Server } from "bun";

interface RelayLike {
  primeOwner(claimId: string, address: string, claimToken: string, namespace: string): void;
  fetch(req: Request, server: Server<never>): Promise<Response | undefined>;
}
interface RelayModule {
  EnvdRelay: new (o: Record<string, unknown>) => RelayLike;
  serveRelay(relay: RelayLike, l: Record<string, unknown>): Server<never>;
  relayEntry?: (relay: RelayLike, idleSeconds: number) => (req: Request, server: Server<never>) => Promise<Response | undefined>;
}

export interface RelaySpec {
  domain: string;
  secret: string;
  root: string;
  claimId: string;
  address: string;
  claimToken: string;
}

/** Start the relay of the tree at `root` in this process; its port, the token to present, and its stop. */
export async function startRelayFrom(root: string, listener: string, spec: RelaySpec): Promise<{ port: number; token: string; stop(): void }> {
  const relayMod = (await import(join(root, "shared/relay/index.ts"))) as RelayModule;
  const { createLogger } = (await import(join(root, "shared/log/index.ts"))) as { createLogger(o: { level: string }): unknown };
  // The token each tree's e2b surface hands out: tagged since lane tags, the bare HMAC before.
  const issuedToken = async (): Promise<string> => {
    try {
      const t = (await import(join(root, "shared/envd-token/index.ts"))) as { envdAccessToken(s: string, id: string, tok: string): string };
      return t.envdAccessToken(spec.secret, spec.claimId, spec.claimToken);
    } catch {
      const t = (await import(join(root, "shared/e2b/index.ts"))) as { deriveAccessToken(s: string, tok: string): string };
      return t.deriveAccessToken(spec.secret, spec.claimToken);
    }
  };
  const log = createLogger({ level: "warn" });
  const relay = new relayMod.EnvdRelay({
    domain: spec.domain,
    fleet: { nodes: () => [], ready: async () => undefined, stop: async () => undefined },
    envdSecret: spec.secret,
    rootToken: spec.root,
    namespace: "",
    guestHttp2: false,
    log,
  });
  relay.primeOwner(spec.claimId, spec.address, spec.claimToken, "bench");
  // The fleet here is empty, so the primed entry must not age out of the owner cache (OWNER_TTL_MS, 60 s). Rarely:
  // each prime derives the token (HMACs), which would show in the figure.
  const prime = setInterval(() => relay.primeOwner(spec.claimId, spec.address, spec.claimToken, "bench"), 20_000);
  let server: Server<never>;
  if (listener === "serve") server = relayMod.serveRelay(relay, { address: "127.0.0.1:0", log });
  else {
    const entry = listener === "idle0" && relayMod.relayEntry ? relayMod.relayEntry(relay, 0) : relay.fetch;
    server = Bun.serve({ hostname: "127.0.0.1", port: 0, idleTimeout: 0, development: false, fetch: entry } as Parameters<typeof Bun.serve>[0]) as unknown as Server<never>;
  }
  return { port: server.port!, token: await issuedToken(), stop: () => (clearInterval(prime), void server.stop(true)) };
}

if (import.meta.main) {
  const started = await startRelayFrom(process.argv[2]!, process.argv[3]!, JSON.parse(process.argv[4]!) as RelaySpec);
  // A clean exit on SIGTERM, so a `--cpu-prof` run (RELAY_CPU_CHILD_FLAGS) writes its profile.
  process.on("SIGTERM", () => process.exit(0));
  console.log(JSON.stringify({ port: started.port, token: started.token }));
}
