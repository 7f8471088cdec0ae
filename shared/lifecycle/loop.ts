// The start()/stop() skeleton the periodic loops share (the inventory publisher, the Node status loop, the Lease
// heartbeat): the constructor has no side effects, start() begins the body once (a second call does nothing), and
// stop() aborts the signal the body watches, then waits for the body to return. A stop() before any start() just
// aborts, so a later start() runs a body that sees the signal already aborted.
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
