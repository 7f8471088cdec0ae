// What a file's beforeAll starts, stopped by its afterAll even when beforeAll failed or gave up waiting while a start
// was still running (bun runs afterAll after a beforeAll timeout, but the start it abandoned goes on and would leave
// its servers and child processes to the next file: issue 27). Each start is tracked as a promise; stopAll waits for
// every one to settle, then stops what came up, newest first.
export interface Stoppable {
  stop(): Promise<unknown> | unknown;
}

export class Started {
  private readonly starts: Promise<Stoppable | undefined>[] = [];

  /** Track `start` and hand back its value (a start that fails has nothing to stop: it cleans up after itself). */
  track<T extends Stoppable>(start: Promise<T>): Promise<T> {
    this.starts.push(start.catch(() => undefined));
    return start;
  }

  async stopAll(): Promise<void> {
    for (const s of this.starts.splice(0).reverse()) await (await s)?.stop();
  }
}
