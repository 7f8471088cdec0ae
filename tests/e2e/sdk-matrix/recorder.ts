// One recorder for the JS-driven SDK matrix suites (the e2b JS SDK, the code interpreter SDKs, the CLI): each call
// is made by the stock client and judged as it is made, into the same cells the Python suite writes
// (tests/support/python/matrix.ts renders every client's section of docs/sdk-matrix.md). A call that throws
// where e2b cloud would not is "fails" with what it threw; the suites assert there is none.
import { renderSection, writeSection, type Cell, type Verdict } from "#tests/support/python/matrix.ts";
import { REPO } from "#tests/e2e/stack/run-stack.ts";
import { join } from "node:path";

export interface Judgement {
  verdict: Verdict;
  detail: string;
  reason?: string;
}

export const ok = (detail = "as e2b cloud"): Judgement => ({ verdict: "ok", detail });
export const differs = (reason: string, detail = ""): Judgement => ({ verdict: "differs", detail, reason });
export const fails = (detail: string): Judgement => ({ verdict: "fails", detail });
/** ok when `cond`, else fails with what was seen. */
export const expectThat = (cond: boolean, seen: unknown): Judgement => (cond ? ok() : fails(`saw ${typeof seen === "string" ? seen : JSON.stringify(seen)}`));

const errorText = (e: unknown) => (e instanceof Error ? `${e.constructor.name}: ${e.message}` : String(e)).slice(0, 300);

export class Recorder {
  readonly cells: Cell[] = [];

  /** Runs one call and records its verdict; a throw is "fails" unless `onError` judges it. */
  async cell(stack: string, variant: string, call: string, fn: () => Promise<Judgement>, onError?: (e: unknown) => Judgement | undefined): Promise<Judgement> {
    let j: Judgement;
    try {
      j = await fn();
    } catch (e) {
      j = onError?.(e) ?? fails(`threw ${errorText(e)}`);
    }
    this.cells.push({ stack, variant, call, verdict: j.verdict, detail: j.detail, ...(j.reason ? { reason: j.reason } : {}) });
    if (j.verdict !== "ok") console.log(`${stack.split(" (")[0]}, ${variant}, ${call}: ${j.verdict}: ${j.detail}${j.reason ? ` (${j.reason.slice(0, 80)}…)` : ""}`);
    return j;
  }

  failures(stack: string): string[] {
    return this.cells.filter((c) => c.stack === stack && c.verdict === "fails").map((c) => `${c.variant} ${c.call}: ${c.detail}`);
  }

  /** Rewrites the client's section of docs/sdk-matrix.md, only when every stack ran (a filtered run keeps the doc). */
  write(key: string, title: string, intro: string, stacks: string[]): void {
    const ran = new Set(this.cells.map((c) => c.stack));
    if (!stacks.every((s) => ran.has(s))) {
      console.log(`docs/sdk-matrix.md section ${key} not regenerated: ${ran.size} of ${stacks.length} stacks ran`);
      return;
    }
    writeSection(join(REPO, "docs", "sdk-matrix.md"), key, renderSection(title, intro, stacks, this.cells));
  }
}

export { errorText };
