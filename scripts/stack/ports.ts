// The local stack's fixed loopback ports (so the printed export lines stay the same from run to run), each
// overridable by an environment variable, and the check that every one is free before anything starts: a taken
// port is a clear message and exit 1, never a half-started stack.
import net from "node:net";

export interface PortSpec {
  /** What listens there, for the message. */
  what: string;
  env: string;
  fallback: number;
}

export const PORTS = {
  e2b: { what: "e2b API", env: "STACK_E2B_PORT", fallback: 3280 },
  proxy: { what: "envd proxy", env: "STACK_PROXY_PORT", fallback: 3281 },
  node0: { what: "sandboxd simulator node 0", env: "STACK_NODE0_PORT", fallback: 7780 },
  node1: { what: "sandboxd simulator node 1", env: "STACK_NODE1_PORT", fallback: 7781 },
  kubelet0: { what: "vk-sandbox kubelet API (node 0)", env: "STACK_KUBELET0_PORT", fallback: 10260 },
  kubelet1: { what: "vk-sandbox kubelet API (node 1)", env: "STACK_KUBELET1_PORT", fallback: 10261 },
  apiserver: { what: "sandbox-apiserver", env: "STACK_APISERVER_PORT", fallback: 3443 },
} as const satisfies Record<string, PortSpec>;

export type PortName = keyof typeof PORTS;

/** A port that is taken or cannot be bound (exit 1). */
export class PortError extends Error {}
/** A port variable that is not a port (a usage error: exit 2). */
export class PortValueError extends PortError {}

export function portOf(name: PortName, env: Record<string, string | undefined> = process.env): number {
  const spec = PORTS[name];
  const raw = env[spec.env];
  if (raw === undefined || raw === "") return spec.fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 1 || n > 65535) throw new PortValueError(`${spec.env}=${JSON.stringify(raw)}: expected a port 1-65535`);
  return n;
}

function probe(port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", (e) => resolve(e as NodeJS.ErrnoException));
    s.listen({ port, host: "127.0.0.1", exclusive: true }, () => s.close(() => resolve(undefined)));
  });
}

/**
 * Every named port, checked free on 127.0.0.1; throws PortError naming the first one taken and its variable. Every
 * value is validated before any port is probed, so a usage error (exit 2) never depends on what else is running.
 */
export async function checkPortsFree(names: PortName[], env: Record<string, string | undefined> = process.env): Promise<Record<PortName, number>> {
  const out = {} as Record<PortName, number>;
  const seen = new Map<number, PortName>();
  for (const n of names) {
    const port = portOf(n, env);
    const clash = seen.get(port);
    if (clash) throw new PortValueError(`port ${port} is set for both the ${PORTS[clash].what} and the ${PORTS[n].what}: give ${PORTS[n].env} another value`);
    seen.set(port, n);
    out[n] = port;
  }
  for (const n of names) {
    const err = await probe(out[n]);
    if (err) {
      const why = err.code === "EADDRINUSE" ? "is already in use" : `cannot be bound (${err.code ?? err.message})`;
      throw new PortError(`port ${out[n]} for the ${PORTS[n].what} ${why}: stop what holds it, or choose another port with ${PORTS[n].env}=<port>`);
    }
  }
  return out;
}
