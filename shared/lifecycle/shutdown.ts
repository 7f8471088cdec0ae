// Graceful shutdown in stages (docs/decisions.md "staged-shutdown", after e2b's client-proxy): on the first SIGINT/SIGTERM
//   1. draining: hooks flip readiness first, so load balancers and kube-proxy stop sending work;
//   2. grace wait: give them time to notice (drainGraceMs);
//   3. close the listeners (in parallel; each bounded);
//   4. run the closers in reverse registration order (last started, first stopped; each bounded);
//   5. exit 0 when every step finished in time, 1 otherwise.
// The whole drain is bounded too, and a second signal exits 1 at once (an operator pressing Ctrl-C
// twice means it). Signals, the clock and exit are injected so tests need no real signals.
import type { Logger } from "../log/index.ts";
import { type Clock, realClock } from "../clock/index.ts";

export type ShutdownSignal = "SIGINT" | "SIGTERM";

/** The part of `process` the shutdown listens on. */
export interface SignalSource {
  on(signal: ShutdownSignal, listener: () => void): unknown;
  off(signal: ShutdownSignal, listener: () => void): unknown;
}

export type CloseFn = () => unknown | Promise<unknown>;

export interface ShutdownOptions {
  logger: Logger;
  /** Wait between marking draining and closing listeners. Default 0. */
  drainGraceMs?: number;
  /** Bound on each listener close, each closer and each draining hook. Default 10 s. */
  stepTimeoutMs?: number;
  /** Bound on the whole shutdown after the signal. Default 30 s (under Kubernetes' 30 s grace period
   *  plus the grace wait, the kubelet's SIGKILL would otherwise decide the exit code). */
  totalTimeoutMs?: number;
  signals?: SignalSource;
  exit?: (code: number) => void;
  /** Times the grace wait. */
  clock?: Pick<Clock, "sleep">;
}

interface Step {
  name: string;
  close: CloseFn;
}

class StepTimeout extends Error {
  override readonly name = "StepTimeout";
}

export class Shutdown {
  private readonly log: Logger;
  private readonly drainGraceMs: number;
  private readonly stepTimeoutMs: number;
  private readonly totalTimeoutMs: number;
  private readonly signals: SignalSource;
  private readonly exitFn: (code: number) => void;
  private readonly clock: Pick<Clock, "sleep">;
  private readonly drainHooks: Step[] = [];
  private readonly listeners: Step[] = [];
  private readonly closers: Step[] = [];
  private running: Promise<number> | undefined;
  private resolveDone!: (code: number) => void;
  private installed = false;
  private readonly onSignal = (signal: ShutdownSignal) => {
    if (this.running) {
      this.log.error({ signal }, "second signal during shutdown; exiting now");
      this.exitFn(1);
      return;
    }
    this.log.info({ signal }, "signal received; shutting down");
    void this.shutdown(signal).then((code) => this.exitFn(code));
  };
  private readonly onSigint = () => this.onSignal("SIGINT");
  private readonly onSigterm = () => this.onSignal("SIGTERM");

  /** Resolves with the exit code once a shutdown has finished. */
  readonly done: Promise<number>;

  constructor(options: ShutdownOptions) {
    this.log = options.logger.child({ component: "shutdown" });
    this.drainGraceMs = options.drainGraceMs ?? 0;
    this.stepTimeoutMs = options.stepTimeoutMs ?? 10_000;
    this.totalTimeoutMs = options.totalTimeoutMs ?? 30_000;
    this.signals = options.signals ?? (process as unknown as SignalSource);
    this.exitFn = options.exit ?? ((code) => process.exit(code));
    this.clock = options.clock ?? realClock;
    this.done = new Promise((resolve) => {
      this.resolveDone = resolve;
    });
  }

  /** True from the first signal (or shutdown call) on; health endpoints read it. */
  get draining(): boolean {
    return this.running !== undefined;
  }

  /** Stage 1: runs first, e.g. fail /readyz. */
  onDraining(name: string, hook: CloseFn): void {
    this.drainHooks.push({ name, close: hook });
  }

  /** Stage 3: stop accepting connections and drain in-flight requests. */
  addListener(name: string, close: CloseFn): void {
    this.listeners.push({ name, close });
  }

  /** Stage 4: loops, informers, clients; run in reverse registration order. */
  addCloser(name: string, close: CloseFn): void {
    this.closers.push({ name, close });
  }

  /** Subscribes to SIGINT and SIGTERM. */
  install(): void {
    if (this.installed) return;
    this.installed = true;
    this.signals.on("SIGINT", this.onSigint);
    this.signals.on("SIGTERM", this.onSigterm);
  }

  uninstall(): void {
    if (!this.installed) return;
    this.installed = false;
    this.signals.off("SIGINT", this.onSigint);
    this.signals.off("SIGTERM", this.onSigterm);
  }

  /** Runs the stages once; later calls return the same promise. Resolves with the exit code. */
  shutdown(reason: string): Promise<number> {
    if (!this.running) {
      this.running = this.runBounded(reason).then((code) => {
        this.resolveDone(code);
        return code;
      });
    }
    return this.running;
  }

  private async runBounded(reason: string): Promise<number> {
    const started = performance.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<number>((resolve) => {
      timer = setTimeout(() => {
        this.log.error({ totalTimeoutMs: this.totalTimeoutMs }, "shutdown did not finish in time; abandoning the rest");
        resolve(1);
      }, this.totalTimeoutMs);
    });
    try {
      const code = await Promise.race([this.runStages(reason), deadline]);
      this.log.info({ reason, code, ms: Math.round(performance.now() - started) }, "shutdown finished");
      return code;
    } finally {
      clearTimeout(timer);
    }
  }

  private async runStages(reason: string): Promise<number> {
    let ok = true;
    this.log.info({ reason }, "draining");
    for (const hook of this.drainHooks) ok = (await this.runStep("draining", hook)) && ok;
    if (this.drainGraceMs > 0) await this.clock.sleep(this.drainGraceMs);
    const closed = await Promise.all(this.listeners.map((listener) => this.runStep("listener", listener)));
    ok = closed.every(Boolean) && ok;
    for (const closer of [...this.closers].reverse()) ok = (await this.runStep("closer", closer)) && ok;
    return ok ? 0 : 1;
  }

  private async runStep(stage: string, step: Step): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StepTimeout(`did not finish within ${this.stepTimeoutMs}ms`)), this.stepTimeoutMs);
    });
    try {
      await Promise.race([Promise.resolve().then(step.close), timeout]);
      this.log.debug({ stage, step: step.name }, "shutdown step done");
      return true;
    } catch (err) {
      this.log.error({ stage, step: step.name, err }, "shutdown step failed");
      return false;
    } finally {
      clearTimeout(timer);
    }
  }
}
