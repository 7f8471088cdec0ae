// The project's loops. LoopRunner is the start()/stop() skeleton: the constructor has no side effects, start() begins
// the body once (a second call does nothing), and stop() aborts the signal the body watches, then waits for the
// body to return. A stop() before any start() just aborts, so a later start() runs a body that sees the signal
// already aborted.
//
// PeriodicLoop is the one periodic loop (the Node status loop, the Lease heartbeat, the inventory publisher, the
// provider's verify/lease/owner/orphan loops): a tick, then one interval on the injected Clock before the next, so
// a slow tick never stacks ticks. A tick that returns true ends the loop; a tick that throws is logged and the
// loop goes on. LoopRunner stays for loops that are not periodic (a poll that can be woken early).
import { type Clock, realClock, type Timer } from "../clock/index.ts";
import { errorMessage } from "../log/index.ts";

export class LoopRunner {
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;

  /** `body` runs until it returns; it should return soon after `signal` aborts. */
  constructor(private readonly body: (signal: AbortSignal) => Promise<void>) {}

  /** Aborted by stop(); also for waits inside one round (backoff sleeps) that must end with the loop. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Idempotent. */
  start(): void {
    if (this.running) return;
    this.running = this.body(this.abort.signal);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }
}

export interface PeriodicLoopOptions {
  /** Names the loop in log lines. */
  name: string;
  /** Time between the end of one tick and the start of the next. <= 0: start() does nothing. */
  intervalMs: number;
  /** One round. Returning true ends the loop (nothing left to do). Should return soon after `signal` aborts. */
  tick: (signal: AbortSignal) => Promise<boolean | void>;
  /** "now": the first tick runs at start(); "after-interval" (default): one interval after it. */
  first?: "now" | "after-interval";
  clock?: Clock;
  /** Where a thrown tick (error) and a tick that ended the loop (debug) are reported; a pino Logger fits. */
  log?: { error(obj: object, msg: string): void; debug?(obj: object, msg: string): void };
}

export class PeriodicLoop {
  private readonly abort = new AbortController();
  private readonly clock: Clock;
  private timer: Timer | undefined;
  private running: Promise<void> | undefined;
  private state: "new" | "active" | "ended" = "new";
  private ticks = 0;
  private tickWaiters: Array<{ n: number; resolve: () => void }> = [];

  constructor(private readonly o: PeriodicLoopOptions) {
    this.clock = o.clock ?? realClock;
  }

  /** Names the loop in log lines. */
  get name(): string {
    return this.o.name;
  }

  /** Aborted by stop(); also for waits inside one tick (backoff sleeps) that must end with the loop. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** True from start() until stop() or a tick that ended the loop. */
  get active(): boolean {
    return this.state === "active";
  }

  /** Ticks completed so far. */
  get completed(): number {
    return this.ticks;
  }

  /** Idempotent; does nothing after stop() or when the interval is <= 0. */
  start(): void {
    if (this.state !== "new" || this.o.intervalMs <= 0 || this.abort.signal.aborted) return;
    this.state = "active";
    if (this.o.first === "now") this.fire();
    else this.schedule();
  }

  /** Stops scheduling, aborts the signal and waits for a tick in progress. */
  async stop(): Promise<void> {
    this.abort.abort();
    if (this.state === "active") this.state = "ended";
    this.timer?.cancel();
    this.timer = undefined;
    await this.running;
  }

  /** Resolves once `n` ticks have completed and the next one is scheduled (tests drive a fake clock by it). */
  untilTicks(n: number): Promise<void> {
    if (this.ticks >= n) return Promise.resolve();
    return new Promise((resolve) => this.tickWaiters.push({ n, resolve }));
  }

  private schedule(): void {
    if (this.state !== "active") return;
    this.timer = this.clock.after(this.o.intervalMs, () => {
      this.timer = undefined;
      this.fire();
    });
  }

  /** The tick starts synchronously inside the timer callback, so a fake clock's advance() starts it at once. */
  private fire(): void {
    this.running = this.runTick().finally(() => (this.running = undefined));
  }

  private async runTick(): Promise<void> {
    let done = false;
    try {
      done = (await this.o.tick(this.abort.signal)) === true;
    } catch (e) {
      this.o.log?.error({ loop: this.o.name, err: errorMessage(e) }, "loop tick failed");
    }
    if (done && this.state === "active") {
      this.state = "ended";
      this.o.log?.debug?.({ loop: this.o.name }, "loop finished");
    }
    this.schedule();
    this.ticks++;
    this.tickWaiters = this.tickWaiters.filter((w) => (w.n <= this.ticks ? (w.resolve(), false) : true));
  }
}
