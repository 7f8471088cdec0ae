// Stopping a server the attack may have wedged: SIGTERM first (its staged shutdown), SIGKILL when a busy event loop
// cannot run the signal handler in time (the chunked-decoder loop of issue 17 case 1 never yields).
import type { Subprocess } from "bun";

export async function stopChild(c: { proc: Subprocess }, graceMs = 5_000): Promise<number> {
  if (c.proc.exitCode !== null || c.proc.signalCode !== null) return c.proc.exitCode ?? -1;
  c.proc.kill("SIGTERM");
  const t = setTimeout(() => c.proc.kill("SIGKILL"), graceMs);
  try {
    return await c.proc.exited;
  } finally {
    clearTimeout(t);
  }
}
