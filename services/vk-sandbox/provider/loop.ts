// A periodic loop on an injected clock: the next tick is scheduled only after the previous one finished, so
// a slow sandboxd never stacks ticks. A tick that returns true ends the loop (claim verification stops once
// nothing is left to verify).
import type { Logger } from "pino";
import type { Clock } from "./types.ts";
import { messageOf } from "./errors.ts";

export class Loop {
  private timer: { cancel(): void } | undefined;
  private running: Promise<void> | undefined;
  private active = false;
  private ticks = 0;
  private tickWaiters: Array<{ n: number; resolve: () => void }> = [];

  constructor(
    readonly name: string,
    private readonly clock: Clock,
    private readonly intervalMs: number,
    private readonly tick: () => Promise<boolean | void>,
    private readonly log: Logger,
  ) {}

  get started(): boolean {
    return this.active;
  }

  /** Ticks completed so far. */
  get completed(): number {
    return this.ticks;
  }

  /** Resolves once `n` ticks have completed and the next one is scheduled (tests drive the clock by it). */
  untilTicks(n: number): Promise<void> {
    if (this.ticks >= n) return Promise.resolve();
    return new Promise((resolve) => this.tickWaiters.push({ n, resolve }));
  }

  /** First tick after one interval. */
  start(): void {
    if (this.active || this.intervalMs <= 0) return;
    this.active = true;
    this.schedule();
  }

  /** Stops scheduling and waits for a tick in progress. */
  async stop(): Promise<void> {
    this.active = false;
    this.timer?.cancel();
    this.timer = undefined;
    await this.running;
  }

  private schedule(): void {
    if (!this.active) return;
    this.timer = this.clock.after(this.intervalMs, () => {
      this.timer = undefined;
      this.running = this.runTick().finally(() => (this.running = undefined));
    });
  }

  private async runTick(): Promise<void> {
    let done = false;
    try {
      done = (await this.tick()) === true;
    } catch (e) {
      this.log.error({ loop: this.name, err: messageOf(e) }, "provider loop tick failed");
    }
    if (done) {
      this.active = false;
      this.log.debug({ loop: this.name }, "provider loop finished");
    } else {
      this.schedule();
    }
    this.ticks++;
    this.tickWaiters = this.tickWaiters.filter((w) => (w.n <= this.ticks ? (w.resolve(), false) : true));
  }
}
