// The errors suites' rows in docs/sdk-matrix.md, through the matrix generator as it is (tests/support/python/matrix.ts
// writeSection: one marked section per suite). A test records its cell only after its assertions passed; the section
// is rewritten only when every test of the file recorded, so a failing or filtered run leaves the doc alone.
import { join } from "node:path";
import { REPO } from "#tests/e2e/stack/run-stack.ts";
import { renderSection, writeSection, type Cell } from "#tests/support/python/matrix.ts";

export class ErrorRows {
  private readonly cells: Cell[] = [];
  private readonly done = new Set<string>();

  constructor(
    private readonly key: string,
    private readonly title: string,
    private readonly intro: string,
    private readonly stack: string,
    private readonly tests: number,
  ) {}

  /** One call's cell: `ok` is e2b cloud's behaviour (what the SDK raises or returns against it). */
  ok(test: string, variant: string, call: string, detail: string): void {
    this.cells.push({ stack: this.stack, variant, call, verdict: "ok", detail });
    this.done.add(test);
  }

  /** One call's cell where we differ from e2b cloud on purpose: `reason` is the note under the table. */
  differs(test: string, variant: string, call: string, detail: string, reason: string): void {
    this.cells.push({ stack: this.stack, variant, call, verdict: "differs", detail, reason });
    this.done.add(test);
  }

  write(): void {
    if (this.done.size !== this.tests) {
      console.log(`docs/sdk-matrix.md section ${this.key} not regenerated: ${this.done.size} of ${this.tests} tests recorded`);
      return;
    }
    writeSection(join(REPO, "docs", "sdk-matrix.md"), this.key, renderSection(this.title, this.intro, [this.stack], this.cells));
  }
}
