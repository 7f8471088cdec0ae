// Build slots (docs/e2b.md §6.1): at most --e2b-build-parallel builds run at once in this process; a start beyond
// them gets none and the route answers 429 while the build stays `waiting`.
/** Counts running builds; a start beyond `parallel` gets no slot (the route answers 429). */
export class BuildSlots {
  private used = 0;

  constructor(private readonly parallel: number) {}

  tryAcquire(): (() => void) | undefined {
    if (this.used >= this.parallel) return undefined;
    this.used++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used--;
    };
  }

  get inUse(): number {
    return this.used;
  }
}
