// What the rig reads off a server process from outside: CPU time and resident set from /proc (so only the
// server's own figures count), and every gauge a Prometheus text page exposes. Gauges are found by their
// `# TYPE <name> gauge` lines, not by a list of names: a gauge a later change adds (relays, buffered bytes) is
// checked for its return to idle without the rig knowing its name.

const CLK_TCK = 100; // Linux USER_HZ on every architecture Bun ships for

/** utime + stime of a process, in seconds. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await Bun.file(`/proc/${pid}/stat`).text();
  // Fields after the command name (which may hold spaces, so split after its closing parenthesis).
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

/** Current resident set of a process, in bytes. */
export async function rssBytes(pid: number): Promise<number> {
  const status = await Bun.file(`/proc/${pid}/status`).text();
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
}

/** Samples a process's RSS and CPU every `everyMs` until stopped: the peak RSS and the busiest interval's CPU share. */
export function sampler(pid: number, everyMs = 250) {
  let peak = 0;
  let maxCpu = 0;
  let cpuSum = 0;
  let samples = 0;
  let lastCpu: number | undefined;
  let lastAt = performance.now();
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const [rss, cpu] = await Promise.all([rssBytes(pid), cpuSeconds(pid)]);
        const now = performance.now();
        if (rss > peak) peak = rss;
        if (lastCpu !== undefined) {
          const share = (cpu - lastCpu) / ((now - lastAt) / 1000);
          maxCpu = Math.max(maxCpu, share);
          cpuSum += share;
          samples++;
        }
        lastCpu = cpu;
        lastAt = now;
      } catch {
        return; // the process is gone
      }
      await Bun.sleep(everyMs);
    }
  })();
  return {
    /** Highest RSS seen so far, bytes. */
    peak: () => peak,
    async stop(): Promise<{ peakRss: number; maxCpu: number; meanCpu: number }> {
      stopped = true;
      await loop;
      return { peakRss: peak, maxCpu, meanCpu: samples ? cpuSum / samples : 0 };
    },
  };
}

/** Every sample of every gauge on a Prometheus text page: `name{labels}` -> value. */
export function gauges(text: string): Record<string, number> {
  const kinds = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) gauge$/gm)) kinds.add(m[1]!);
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || line.trim() === "") continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m && kinds.has(m[1]!)) out[m[1]! + (m[2] ?? "")] = Number(m[3]);
  }
  return out;
}

/** Gauges that are not at their idle value (a gauge missing at idle counts as idle 0). */
export function gaugesOffIdle(idle: Record<string, number>, now: Record<string, number>, ignore: RegExp): Record<string, { idle: number; now: number }> {
  const off: Record<string, { idle: number; now: number }> = {};
  for (const [k, v] of Object.entries(now)) {
    if (ignore.test(k)) continue;
    const base = idle[k] ?? 0;
    if (v !== base) off[k] = { idle: base, now: v };
  }
  return off;
}

/** The p-th percentile (0..100) of `xs`, nearest rank; NaN for none. */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
