// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// The code interpreter's protocol on guest port 49999 (what e2b's code-interpreter template serves and the
// @e2b/code-interpreter and e2b-code-interpreter SDKs call): POST /execute streams NDJSON events (stdout, stderr,
// result, error, number_of_executions, end_of_execution) as the code runs; /contexts creates, lists, restarts and
// removes contexts. Execution is real: a Python context is a kernel process (code-kernel.ts) started inside the
// sandbox through its process table (so it runs as the sandbox's user, in its namespaces, and pauses with it),
// keeping its globals across executions; a JavaScript context runs each cell with node (or bun) in the sandbox.
// Started on the first connection to the port; bounded: 1 MiB of code, 16 contexts, 8 queued cells per context,
// 1 MiB per output line, 16 MiB of output a client has not read.
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { codeMessageEnvelope, guardRequests, uncaughtErrorHandler } from "#shared/http/index.ts";
import { simLog } from "../log.ts";
import { PYTHON_KERNEL } from "./code-kernel.ts";
import type { GuestProcess, ProcEvent } from "./processes.ts";
import type { GuestSandbox } from "./sandbox.ts";

export const CODE_INTERPRETER_PORT = 49999;
const MAX_CODE_BYTES = 1024 * 1024;
const MAX_CONTEXTS = 16;
const MAX_QUEUED = 8;
const MAX_LINE_BYTES = 1024 * 1024;
/** Output a client has not read yet, per cell: past it the cell is cut and its kernel restarted. */
const MAX_UNREAD_BYTES = 16 * 1024 * 1024;

const ExecuteBody = z.object({
  code: z.string(),
  context_id: z.string().nullish(),
  language: z.string().nullish(),
  env_vars: z.record(z.string(), z.string()).nullish(),
});
const ContextBody = z.object({ language: z.string().nullish(), cwd: z.string().nullish() });

type Language = "python" | "javascript";
function languageOf(name: string | null | undefined): Language | undefined {
  const l = (name ?? "python").trim().toLowerCase();
  if (l === "" || l === "python" || l === "python3") return "python";
  if (l === "js" || l === "javascript" || l === "node") return "javascript";
  return undefined;
}

/** The SDKs read an output line's timestamp as Unix nanoseconds (an integer). */
const nowNs = () => Date.now() * 1_000_000;
const line = (msg: object) => `${JSON.stringify(msg)}\n`;
const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const refuse = (status: number, message: string) => json(status, { error: message });

/** One context: a cell queue in front of a Python kernel or the per-cell JavaScript runner. */
class Context {
  private kernel: GuestProcess | undefined;
  /** The JavaScript cell running now (a process per cell). */
  private jsCell: GuestProcess | undefined;
  /** Which kernel's events count: a restarted kernel's late exit must not end the next kernel's cell. */
  private generation = 0;
  /** The running cell's sink for the kernel's event lines; undefined between cells. */
  private sink: ((text: string) => void) | undefined;
  private buffered = "";
  private queue: Promise<void> = Promise.resolve();
  private queued = 0;

  constructor(
    readonly id: string,
    readonly language: Language,
    readonly cwd: string,
    private readonly sb: GuestSandbox,
  ) {}

  describe() {
    return { id: this.id, language: this.language, cwd: this.cwd };
  }

  /** Runs `code`, writing event lines to `out` as they come; cells of one context run one at a time. */
  run(code: string, envs: Record<string, string>, out: (text: string) => void): Promise<void> | undefined {
    if (this.queued >= MAX_QUEUED) return undefined;
    this.queued++;
    const done = this.queue.then(() => (this.language === "python" ? this.runPython(code, envs, out) : this.runJs(code, envs, out)));
    this.queue = done.catch(() => undefined).finally(() => void this.queued--);
    return done;
  }

  private async startKernel(): Promise<GuestProcess> {
    const spawn = { ...this.sb.launch(this.cwd, undefined, {}), stdin: true };
    const mine = ++this.generation;
    this.buffered = "";
    const proc = await this.sb.processes.start({ cmd: "python3", args: ["-u", "-c", PYTHON_KERNEL], envs: {}, cwd: this.cwd }, spawn, (e) => {
      if (mine === this.generation) this.onKernel(e);
    });
    this.kernel = proc;
    return proc;
  }

  private onKernel(e: ProcEvent): void {
    if (e.kind === "data" && e.stream === "stdout") {
      this.buffered += new TextDecoder().decode(e.data);
      let nl: number;
      while ((nl = this.buffered.indexOf("\n")) >= 0) {
        const text = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        if (text.trim() !== "") this.sink?.(`${text}\n`);
      }
      if (this.buffered.length > MAX_LINE_BYTES) {
        this.buffered = "";
        this.sink?.(line({ type: "error", name: "OutputTooLarge", value: `an output line exceeded ${MAX_LINE_BYTES} bytes; the kernel was restarted`, traceback: "" }));
        this.restart();
      }
    } else if (e.kind === "end") {
      this.kernel = undefined;
      this.buffered = "";
      // A kernel that dies mid-cell (os._exit, a crash, a kill) ends the cell with an error; the next cell starts a new one.
      this.sink?.(line({ type: "error", name: "KernelDied", value: `the kernel exited (${e.end.status})`, traceback: "" }));
      this.sink?.(line({ type: "end_of_execution" }));
    }
  }

  private runPython(code: string, envs: Record<string, string>, out: (text: string) => void): Promise<void> {
    return new Promise<void>((resolve) => {
      const finish = () => {
        this.sink = undefined;
        resolve();
      };
      this.sink = (text) => {
        out(text);
        if (text.includes('"type": "end_of_execution"') || text.includes('"type":"end_of_execution"')) finish();
      };
      (this.kernel ? Promise.resolve(this.kernel) : this.startKernel())
        .then((k) => k.writeStdin(new TextEncoder().encode(line({ code, env_vars: envs }))))
        .catch((err: Error) => {
          out(line({ type: "error", name: "KernelUnavailable", value: err.message, traceback: "" }));
          out(line({ type: "end_of_execution" }));
          finish();
        });
    });
  }

  private async runJs(code: string, envs: Record<string, string>, out: (text: string) => void): Promise<void> {
    out(line({ type: "number_of_executions", execution_count: 0 }));
    const pending: Record<"stdout" | "stderr", string> = { stdout: "", stderr: "" };
    const flush = (stream: "stdout" | "stderr", all: boolean) => {
      let nl: number;
      while ((nl = pending[stream].indexOf("\n")) >= 0) {
        out(line({ type: stream, text: pending[stream].slice(0, nl + 1), timestamp: nowNs() }));
        pending[stream] = pending[stream].slice(nl + 1);
      }
      if (all && pending[stream] !== "") {
        out(line({ type: stream, text: pending[stream], timestamp: nowNs() }));
        pending[stream] = "";
      }
    };
    let stderrTail = "";
    const ended = new Promise<{ exitCode: number; status: string }>((resolve, reject) => {
      const spawn = { ...this.sb.launch(this.cwd, undefined, envs), stdin: false };
      void this.sb.processes
        .start({ cmd: "/bin/sh", args: ["-c", 'if command -v node >/dev/null; then exec node -e "$0"; elif command -v bun >/dev/null; then exec bun -e "$0"; else echo "no JavaScript runtime (node or bun) in this sandbox" >&2; exit 127; fi', code], envs, cwd: this.cwd }, spawn, (e) => {
          if (e.kind === "data" && (e.stream === "stdout" || e.stream === "stderr")) {
            const text = new TextDecoder().decode(e.data);
            if (e.stream === "stderr") stderrTail = (stderrTail + text).slice(-8192);
            pending[e.stream] += text;
            flush(e.stream, pending[e.stream].length > MAX_LINE_BYTES);
          } else if (e.kind === "end") resolve(e.end);
        })
        .then((p) => void (this.jsCell = p), reject);
    });
    try {
      const end = await ended.finally(() => void (this.jsCell = undefined));
      flush("stdout", true);
      flush("stderr", true);
      if (end.exitCode !== 0) out(line({ type: "error", name: "Error", value: `the cell ended with ${end.status}`, traceback: stderrTail }));
    } catch (err) {
      out(line({ type: "error", name: "RuntimeUnavailable", value: (err as Error).message, traceback: "" }));
    }
    out(line({ type: "end_of_execution" }));
  }

  restart(): void {
    const k = this.kernel ?? this.jsCell;
    this.kernel = undefined;
    this.generation++;
    // A cell running on the old kernel ends now, with an error saying why.
    this.sink?.(line({ type: "error", name: "KernelRestarted", value: "the context was restarted during this cell", traceback: "" }));
    this.sink?.(line({ type: "end_of_execution" }));
    if (k) {
      try {
        this.sb.processes.signal({ pid: k.pid }, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

/** The code interpreter of one sandbox: its contexts and its listener. */
class CodeInterpreter {
  private readonly contexts = new Map<string, Context>();
  private readonly defaults = new Map<Language, Context>();
  readonly server: ReturnType<typeof Bun.serve>;

  constructor(private readonly sb: GuestSandbox, host: string) {
    this.server = Bun.serve({
      hostname: host,
      port: 0,
      idleTimeout: 0, // a cell may print nothing for minutes
      maxRequestBodySize: MAX_CODE_BYTES + 64 * 1024,
      development: false,
      error: uncaughtErrorHandler(simLog(), codeMessageEnvelope),
      fetch: guardRequests(codeMessageEnvelope, (req: Request) => this.fetch(req)),
    });
  }

  private newContext(language: Language, cwd: string | null | undefined): Context | undefined {
    if (this.contexts.size >= MAX_CONTEXTS) return undefined;
    const c = new Context(randomUUID(), language, cwd && cwd.trim() !== "" ? cwd : this.sb.defaultWorkdir, this.sb);
    this.contexts.set(c.id, c);
    return c;
  }

  private async fetch(req: Request): Promise<Response> {
    const { pathname } = new URL(req.url);
    // The kernel token e2b's server checks is the envd access token: only ever sent by the SDK's runCode; its
    // /contexts calls send none (on e2b cloud the port is public), so like e2b's server this one checks nothing.
    try {
      await this.sb.ready;
    } catch (e) {
      return refuse(503, `sandbox not started: ${(e as Error).message}`);
    }
    if (pathname === "/health") return new Response("OK");
    if (pathname === "/execute" && req.method === "POST") return this.execute(req);
    if (pathname === "/contexts" && req.method === "GET") return json(200, [...this.contexts.values()].map((c) => c.describe()));
    if (pathname === "/contexts" && req.method === "POST") {
      const body = ContextBody.safeParse(await req.json().catch(() => undefined));
      if (!body.success) return refuse(400, `invalid context request: ${body.error.issues[0]?.message}`);
      const language = languageOf(body.data.language);
      if (!language) return refuse(400, `language ${JSON.stringify(body.data.language)} is not served here (python, javascript)`);
      const c = this.newContext(language, body.data.cwd);
      return c ? json(200, c.describe()) : refuse(429, `at most ${MAX_CONTEXTS} contexts`);
    }
    const m = /^\/contexts\/([^/]+)(\/restart)?$/.exec(pathname);
    const c = m ? this.contexts.get(decodeURIComponent(m[1]!)) : undefined;
    if (m && !c) return refuse(404, `context ${JSON.stringify(decodeURIComponent(m[1]!))} not found`);
    if (c && m![2] && req.method === "POST") {
      c.restart();
      return json(200, c.describe());
    }
    if (c && !m![2] && req.method === "DELETE") {
      c.restart();
      this.contexts.delete(c.id);
      for (const [lang, d] of this.defaults) if (d === c) this.defaults.delete(lang);
      return new Response(null, { status: 204 });
    }
    return refuse(404, `no route ${req.method} ${pathname}`);
  }

  private async execute(req: Request): Promise<Response> {
    const text = await req.text();
    if (Buffer.byteLength(text) > MAX_CODE_BYTES) return refuse(413, `code exceeds ${MAX_CODE_BYTES} bytes`);
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      return refuse(400, "the body is not JSON");
    }
    const body = ExecuteBody.safeParse(raw);
    if (!body.success) return refuse(400, `invalid execute request: ${body.error.issues[0]?.message}`);
    let ctx: Context | undefined;
    if (body.data.context_id) {
      ctx = this.contexts.get(body.data.context_id);
      if (!ctx) return refuse(404, `context ${JSON.stringify(body.data.context_id)} not found`);
    } else {
      const language = languageOf(body.data.language);
      if (!language) return refuse(400, `language ${JSON.stringify(body.data.language)} is not served here (python, javascript)`);
      ctx = this.defaults.get(language);
      if (!ctx) {
        ctx = this.newContext(language, undefined);
        if (!ctx) return refuse(429, `at most ${MAX_CONTEXTS} contexts`);
        this.defaults.set(language, ctx);
      }
    }
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    let open = true;
    const running = ctx;
    // Queued by bytes: a client that stops reading cuts its cell at MAX_UNREAD_BYTES instead of growing memory.
    const stream = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c), cancel: () => void (open = false) }, new ByteLengthQueuingStrategy({ highWaterMark: 64 * 1024 }));
    const enc = new TextEncoder();
    const ran = ctx.run(body.data.code, body.data.env_vars ?? {}, (t) => {
      if (!open) return;
      controller.enqueue(enc.encode(t));
      if ((controller.desiredSize ?? 0) < -MAX_UNREAD_BYTES) {
        open = false;
        controller.error(new Error(`more than ${MAX_UNREAD_BYTES} bytes of output unread: the cell was cut`));
        running.restart();
      }
    });
    if (!ran) return refuse(429, `at most ${MAX_QUEUED} cells queued in a context`);
    void ran.finally(() => {
      if (open) controller.close();
    });
    return new Response(stream, { headers: { "content-type": "application/x-ndjson" } });
  }

  stop(): void {
    for (const c of this.contexts.values()) c.restart();
    void this.server.stop(true);
  }
}

const running = new Map<GuestSandbox, CodeInterpreter>();
let sweeper: ReturnType<typeof setInterval> | undefined;

/**
 * Where the ports relay sends a connection to guest port 49999: this sandbox's code interpreter, started on first
 * use. A destroyed sandbox's interpreter is stopped by a sweep (the host gives no destroy hook to this module).
 */
export function codeInterpreterTarget(sb: GuestSandbox, host: string): { host: string; port: number } {
  let ci = running.get(sb);
  if (!ci) {
    ci = new CodeInterpreter(sb, host);
    running.set(sb, ci);
    simLog().debug({ sandbox: sb.id, port: ci.server.port }, "code interpreter started");
    sweeper ??= setInterval(() => {
      for (const [s, c] of running) {
        if (s.alive) continue;
        c.stop();
        running.delete(s);
      }
      if (running.size === 0) {
        clearInterval(sweeper);
        sweeper = undefined;
      }
    }, 1000);
    sweeper.unref?.();
  }
  return { host, port: ci.server.port! };
}
