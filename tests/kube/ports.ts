// Free loopback ports for a test peer. Ports are reserved by binding to port 0 and released just before the peer
// binds them, so another process can race us; the harness retries a start that loses that race.
export function freePorts(n: number): number[] {
  const sockets = Array.from({ length: n }, () =>
    Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } }),
  );
  const ports = sockets.map((s) => s.port);
  for (const s of sockets) s.stop(true);
  return ports;
}

/** True when something accepts TCP connections on 127.0.0.1:port. */
export async function isListening(port: number): Promise<boolean> {
  try {
    const socket = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
    socket.end();
    return true;
  } catch {
    return false;
  }
}
