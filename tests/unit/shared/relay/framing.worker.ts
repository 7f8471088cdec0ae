// Runs framing jobs off the test's thread: a parser that loops forever (issue 17 case 1) then fails the test by
// its deadline, where on the test's own thread it would hang the runner and no timer could fire.
import fc from "fast-check";
import { runChunks, split, type Outcome } from "./framing-run.ts";
import { hostileReply } from "./framing-arbitraries.ts";

export type Job = { kind: "chunks"; chunks: number[][] } | { kind: "fuzz"; runs: number; seed: number };
export type JobResult = { kind: "chunks"; outcome: Outcome; ms: number } | { kind: "fuzz"; failure: string | null; slowestMs: number };

declare const self: { onmessage: ((e: MessageEvent<Job>) => void) | null; postMessage(m: JobResult): void };

self.onmessage = (e) => {
  const job = e.data;
  if (job.kind === "chunks") {
    const t0 = performance.now();
    const outcome = runChunks(job.chunks.map((c) => Uint8Array.from(c)));
    self.postMessage({ kind: "chunks", outcome, ms: performance.now() - t0 });
    return;
  }
  let slowest: { ms: number; wire: Uint8Array; cuts: number[] } | undefined;
  const r = fc.check(
    fc.property(hostileReply, fc.array(fc.nat(), { maxLength: 12 }), (wire, cuts) => {
      const t0 = performance.now();
      const whole = runChunks([wire]);
      const parts = runChunks(split(wire, cuts));
      const ms = performance.now() - t0;
      if (!slowest || ms > slowest.ms) slowest = { ms, wire, cuts };
      // Nothing but the protocol error, and the same outcome however the bytes were split.
      return (whole.ok || whole.framing) && JSON.stringify(whole) === JSON.stringify(parts);
    }),
    { numRuns: job.runs, seed: job.seed },
  );
  // The slowest input timed again, best of 5: one slow run can be a GC pause or the machine's load, a slow input
  // every time is super-linear work.
  let slowestMs = 0;
  if (slowest) {
    const s = slowest;
    slowestMs = Math.min(
      ...Array.from({ length: 5 }, () => {
        const t0 = performance.now();
        runChunks([s.wire]);
        runChunks(split(s.wire, s.cuts));
        return performance.now() - t0;
      }),
    );
  }
  self.postMessage({ kind: "fuzz", failure: r.failed ? `${fc.defaultReportMessage(r) ?? "failed"}` : null, slowestMs });
};
