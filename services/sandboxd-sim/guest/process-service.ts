// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// envd's `process.Process` Connect service over the sandbox's ProcessTable.
// Streams (Start, Connect) send the start event, output as it arrives, then the end event. With the
// `Keepalive-Ping-Interval` header (seconds) they also send keepalive events, as envd does, so idle streams
// survive client idle timeouts. A stream that reaches its Connect deadline (`Connect-Timeout-Ms`, the SDK's
// command `timeoutMs`) kills the process group: a timed-out command does not keep running. A client that merely
// disconnects (the SDK's `disconnect()`) leaves the process running.
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { Process, Signal, type ProcessEvent, type ProcessSelector } from "./gen/process/process_pb.ts";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ProcessEventSchema } from "./gen/process/process_pb.ts";
import { NoSuchProcess, ProcessRefused, type GuestProcess, type ProcEvent, type Selector } from "./processes.ts";
import { PathError } from "./paths.ts";
import type { GuestSandbox } from "./sandbox.ts";
import { basicUser } from "./request-user.ts";

type EventInit = MessageInitShape<typeof ProcessEventSchema>;

/** Output queued for one stream's reader past which the process's output is held back (envd's bounded channels). */
const HOLD_BYTES = 1024 * 1024;

/** The output bytes an event carries (0 for start, end and keepalive). */
function dataBytes(e: EventInit): number {
  const out = e.event?.case === "data" ? e.event.value.output : undefined;
  return out?.value instanceof Uint8Array ? out.value.byteLength : 0;
}

/** A deadline within this much of its end counts as reached (the client's own timer aborts at the same moment). */
const DEADLINE_SLACK_MS = 250;

function selectorOf(s: ProcessSelector | undefined): Selector {
  const sel = s?.selector;
  if (sel?.case === "pid") return { pid: sel.value };
  if (sel?.case === "tag") return { tag: sel.value };
  throw new ConnectError("process selector is required (pid or tag)", Code.InvalidArgument);
}

/** Map the table's errors to Connect codes the SDK understands (NotFound: `kill` returns false). */
function rpcError(e: unknown): ConnectError {
  if (e instanceof ConnectError) return e;
  if (e instanceof NoSuchProcess) return new ConnectError(e.message, Code.NotFound);
  if (e instanceof ProcessRefused || e instanceof PathError) return new ConnectError(e.message, Code.FailedPrecondition);
  return new ConnectError(e instanceof Error ? e.message : String(e), Code.Internal);
}

function toEvent(e: ProcEvent): EventInit {
  switch (e.kind) {
    case "start":
      return { event: { case: "start", value: { pid: e.pid } } };
    case "data":
      return { event: { case: "data", value: { output: { case: e.stream, value: e.data } } } };
    case "end":
      return { event: { case: "end", value: { exitCode: e.end.exitCode, exited: e.end.exited, status: e.end.status, error: e.end.error } } };
  }
}

function keepaliveSeconds(ctx: HandlerContext): number {
  const n = Number(ctx.requestHeader.get("keepalive-ping-interval") ?? "");
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/**
 * The events of one process as a server stream. `subscribe` attaches before the first yield, so a Start stream
 * sees every byte. Ends after the end event; on a reached deadline kills the process and fails DeadlineExceeded.
 */
/** StartResponse and ConnectResponse share this shape: one ProcessEvent in `event`. */
type StreamItem = { event: EventInit };

async function* streamOf(proc: GuestProcess, ctx: HandlerContext, takePending: () => ProcEvent[] = () => []): AsyncGenerator<StreamItem> {
  const queue: EventInit[] = [];
  let wake: (() => void) | undefined;
  // Output bytes queued here for the reader; past HOLD_BYTES the process's output is held back until it drains.
  let queued = 0;
  let holding = false;
  const push = (e: EventInit) => {
    queue.push(e);
    wake?.();
  };
  const unsubscribe = proc.subscribe((e) => {
    if (e.kind === "data") {
      queued += e.data.byteLength;
      if (!holding && queued > HOLD_BYTES) {
        holding = true;
        proc.hold();
      }
    }
    push(toEvent(e));
  });
  // Same tick as the subscription: nothing falls between what was buffered and what the subscription sees.
  const pending = takePending().map(toEvent);
  for (const e of pending) queued += dataBytes(e);
  queue.unshift(...pending);
  const onAbort = () => wake?.();
  ctx.signal.addEventListener("abort", onAbort);
  const every = keepaliveSeconds(ctx);
  const timer = every ? setInterval(() => push({ event: { case: "keepalive", value: {} } }), every * 1000) : undefined;
  try {
    for (;;) {
      while (queue.length) {
        const e = queue.shift()!;
        yield { event: e };
        if (e.event?.case === "data") {
          queued -= dataBytes(e);
          if (holding && queued < HOLD_BYTES / 4) {
            holding = false;
            proc.release();
          }
        }
        if (e.event?.case === "end") return;
      }
      if (ctx.signal.aborted) {
        const remaining = ctx.timeoutMs();
        const reason = ctx.signal.reason;
        const deadline = (reason instanceof ConnectError && reason.code === Code.DeadlineExceeded) || (remaining !== undefined && remaining <= DEADLINE_SLACK_MS);
        if (deadline && !proc.ended) {
          try {
            process.kill(-proc.pid, "SIGKILL");
          } catch {
            // already gone
          }
        }
        throw deadline ? new ConnectError("command timed out", Code.DeadlineExceeded) : new ConnectError("stream cancelled", Code.Canceled);
      }
      await new Promise<void>((r) => (wake = r));
      wake = undefined;
    }
  } finally {
    unsubscribe();
    if (holding) proc.release();
    ctx.signal.removeEventListener("abort", onAbort);
    if (timer) clearInterval(timer);
  }
}

export function processService(sb: GuestSandbox): ServiceImpl<typeof Process> {
  const t = sb.processes;
  return {
    list() {
      return {
        processes: t.list().map((p) => ({
          pid: p.pid,
          tag: p.tag,
          config: { cmd: p.config.cmd, args: p.config.args, envs: p.config.envs, cwd: p.config.cwd },
        })),
      };
    },

    async *start(req, ctx) {
      const cfg = req.process;
      if (!cfg || cfg.cmd === "") throw new ConnectError("process.cmd is required", Code.InvalidArgument);
      let proc: GuestProcess;
      let early: ProcEvent[] | undefined = [];
      const user = basicUser(ctx.requestHeader.get("authorization"));
      try {
        await sb.ready;
        proc = await t.start(
          { cmd: cfg.cmd, args: [...cfg.args], envs: { ...cfg.envs }, cwd: cfg.cwd },
          {
            tag: req.tag,
            user,
            stdin: req.stdin ?? true,
            pty: req.pty ? { cols: req.pty.size?.cols ?? 0, rows: req.pty.size?.rows ?? 0 } : undefined,
            ...sb.launch(cfg.cwd || undefined, user, cfg.envs),
          },
          // Output that arrives between spawn and the stream's own subscription is kept, not lost.
          (e) => early?.push(e),
        );
      } catch (e) {
        throw rpcError(e);
      }
      yield { event: toEvent({ kind: "start", pid: proc.pid }) };
      yield* streamOf(proc, ctx, () => {
        const pending = early ?? [];
        early = undefined;
        return pending;
      });
    },

    async *connect(req, ctx) {
      let proc: GuestProcess;
      try {
        proc = t.find(selectorOf(req.process));
      } catch (e) {
        throw rpcError(e);
      }
      yield { event: toEvent({ kind: "start", pid: proc.pid }) };
      yield* streamOf(proc, ctx);
    },

    update(req) {
      try {
        const proc = t.find(selectorOf(req.process));
        const size = req.pty?.size;
        if (size) proc.resize(size.cols, size.rows);
      } catch (e) {
        throw rpcError(e);
      }
      return {};
    },

    async streamInput(reqs) {
      let proc: GuestProcess | undefined;
      try {
        for await (const r of reqs) {
          const ev = r.event;
          if (ev.case === "start") proc = t.find(selectorOf(ev.value.process));
          else if (ev.case === "data") {
            if (!proc) throw new ConnectError("the first StreamInput event must be start", Code.FailedPrecondition);
            const input = ev.value.input?.input;
            if (input?.case === "stdin" || input?.case === "pty") proc.writeStdin(input.value);
          }
        }
      } catch (e) {
        throw rpcError(e);
      }
      return {};
    },

    sendInput(req) {
      try {
        const proc = t.find(selectorOf(req.process));
        const input = req.input?.input;
        if (input?.case !== "stdin" && input?.case !== "pty") throw new ConnectError("input.stdin or input.pty is required", Code.InvalidArgument);
        proc.writeStdin(input.value);
      } catch (e) {
        throw rpcError(e);
      }
      return {};
    },

    sendSignal(req) {
      const sig = req.signal === Signal.SIGKILL ? "SIGKILL" : req.signal === Signal.SIGTERM ? "SIGTERM" : undefined;
      if (!sig) throw new ConnectError("signal must be SIGNAL_SIGTERM or SIGNAL_SIGKILL", Code.InvalidArgument);
      try {
        t.signal(selectorOf(req.process), sig);
      } catch (e) {
        throw rpcError(e);
      }
      return {};
    },

    closeStdin(req) {
      try {
        t.find(selectorOf(req.process)).closeStdin();
      } catch (e) {
        throw rpcError(e);
      }
      return {};
    },
  };
}

export type { ProcessEvent };
