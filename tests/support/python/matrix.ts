// Judges a Python SDK scenario record against what e2b cloud answers, call by call, and renders the verdicts as the
// SDK matrix (docs/sdk-matrix.md, one marked section per client so each client's suite rewrites only its own).
// Every difference carries its reason; "fails" is what no user could live with, and the tests assert there is none.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import type { ScenarioRecord, ScenarioStep } from "./scenario.ts";
import type { WireProtocol } from "./wire-tap.ts";

export type Verdict = "ok" | "differs" | "fails";

export interface Cell {
  stack: string;
  /** e.g. "sync, HTTP/2 (default)". */
  variant: string;
  call: string;
  verdict: Verdict;
  /** What was seen (figures of this run: logged, not written to the doc). */
  detail: string;
  /** For "differs": why it is not what e2b cloud does (the doc's note, shared by every cell with this reason). */
  reason?: string;
}

const FILE_PATH = "/home/user/py-matrix.txt";
const FILE_TEXT = "written by the Python SDK";

export const REASONS = {
  listLag:
    "a list right after a create or a kill does not show the change yet: the e2b surface answers lists from its fleet view, which learns of it at the next inventory poll (mesh) or NodeInventory publish (full stack); e2b cloud lists it at once. Whether a run sees the lag depends on where the call lands between two polls, so a cell may read ok in one generation and differs in the next (issue 20 part 2, read-your-writes, not yet delivered)",
  plainHttp:
    "every connection was HTTP/1.1: the local stacks are plain http, and the SDK's transport (pyqwest over reqwest) reaches HTTP/2 only through TLS ALPN, never by prior-knowledge h2c (which the envd relay would accept), so the default E2B_HTTP_VERSION=2 speaks HTTP/1.1 here. HTTP/2 needs the SDK's https://api.<domain> and https://<port>-<id>.<domain> scheme behind TLS (issue 20 part 6, not yet delivered)",
} as const;

type Judged = [Verdict, string, string?];

const Converged = (v: unknown): v is { at_once: boolean; agreed: boolean; after_ms: number } =>
  typeof v === "object" && v !== null && typeof (v as { at_once?: unknown }).at_once === "boolean" && typeof (v as { agreed?: unknown }).agreed === "boolean";

function describeStep(s: ScenarioStep): string {
  if (s.status === "ok") return `returned ${JSON.stringify(s.value)}`;
  if (s.status === "error") return `raised ${s.error.type}: ${s.error.message}`;
  return "skipped (an earlier step failed)";
}

function judgeConverged(s: ScenarioStep, what: string): Judged {
  if (s.status !== "ok" || !Converged(s.value)) return ["fails", describeStep(s)];
  const v = s.value;
  if (!v.agreed) return ["fails", `${what} still not true after ${v.after_ms} ms`];
  if (v.at_once) return ["ok", `${what} at once`];
  return ["differs", `${what} only after ${v.after_ms} ms`, REASONS.listLag];
}

/** The verdict for one step: what a user's script relies on, as e2b cloud behaves. */
export function judgeStep(s: ScenarioStep): Judged {
  const ok = (cond: boolean, seen: string): Judged => (cond ? ["ok", seen] : ["fails", seen]);
  const v = s.status === "ok" ? (s.value as Record<string, unknown> | string | boolean | null) : undefined;
  const seen = describeStep(s);
  switch (s.call) {
    case "Sandbox.create":
      return ok(typeof (v as { sandbox_id?: unknown } | undefined)?.sandbox_id === "string", seen);
    case "commands.run": {
      const r = v as { stdout?: unknown; exit_code?: unknown } | undefined;
      return ok(r?.stdout === "hello\n" && r.exit_code === 0, seen);
    }
    case "files.write":
      return ok(v === FILE_PATH, seen);
    case "files.read":
      return ok(v === FILE_TEXT, seen);
    case "set_timeout":
      return ok(s.status === "ok", seen);
    case "get_info": {
      const r = v as { state?: unknown; seconds_left?: unknown } | undefined;
      // set_timeout(120) just before: the end moved to about two minutes from now.
      const left = typeof r?.seconds_left === "number" ? r.seconds_left : -1;
      return ok(r?.state === "running" && left >= 100 && left <= 121, seen);
    }
    case "Sandbox.list":
      return judgeConverged(s, "the new sandbox listed");
    case "kill":
      return ok(v === true, seen);
    case "Sandbox.list after kill":
      return judgeConverged(s, "the killed sandbox gone from the list");
    case "Sandbox.get_info after kill":
      return ok(s.status === "error" && s.error.type === "SandboxNotFoundException", seen);
    default:
      return ["fails", `no expectation for ${s.call}: ${seen}`];
  }
}

/** The pseudo-call for what went over the wire: every connection the SDK opened, on the API and the sandbox URL. */
export function judgeWire(requested: "1.1" | "2", seen: WireProtocol[]): Judged {
  const counts = Object.entries(seen.reduce<Record<string, number>>((m, p) => ((m[p] = (m[p] ?? 0) + 1), m), {}))
    .map(([p, n]) => `${n} × ${p}`)
    .join(", ");
  const detail = `connections: ${counts || "none"}`;
  if (seen.length === 0 || seen.includes("other")) return ["fails", detail];
  if (requested === "1.1") return seen.every((p) => p === "http/1.1") ? ["ok", detail] : ["fails", detail];
  if (seen.every((p) => p === "h2c")) return ["ok", detail];
  return ["differs", detail, REASONS.plainHttp];
}

export function cellsFor(stack: string, variant: string, rec: ScenarioRecord, wire: { requested: "1.1" | "2"; seen: WireProtocol[] }): Cell[] {
  const cell = (call: string, [verdict, detail, reason]: Judged): Cell => ({ stack, variant, call, verdict, detail, ...(reason ? { reason } : {}) });
  return [...rec.steps.map((s) => cell(s.call, judgeStep(s))), cell("HTTP version on the wire", judgeWire(wire.requested, wire.seen))];
}

const esc = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

/**
 * The client's section: one table per stack (call × variant), then one note per distinct reason. The doc carries
 * verdicts and reasons only, so a regeneration changes it only when a behaviour changes; a failure's note says
 * what was seen, since a failing suite is read from its log anyway.
 */
export function renderSection(title: string, intro: string, stacks: string[], cells: Cell[]): string {
  const lines = [`## ${title}`, "", intro, ""];
  const notes: string[] = [];
  const noteFor = (c: Cell): number => {
    const text = c.verdict === "differs" ? (c.reason ?? c.detail) : `fails: \`${c.call}\` ${c.detail}`;
    const at = notes.indexOf(text);
    return at >= 0 ? at + 1 : notes.push(text);
  };
  for (const stack of stacks) {
    const here = cells.filter((c) => c.stack === stack);
    lines.push(`### ${stack}`, "");
    if (here.length === 0) {
      lines.push("Not run in the last generation of this file.", "");
      continue;
    }
    const variants = [...new Set(here.map((c) => c.variant))];
    const calls = [...new Set(here.map((c) => c.call))];
    lines.push(`| call | ${variants.join(" | ")} |`, `|---|${variants.map(() => "---|").join("")}`);
    for (const call of calls) {
      const row = variants.map((v) => {
        const c = here.find((x) => x.call === call && x.variant === v);
        if (!c) return "not run";
        return c.verdict === "ok" ? "ok" : `${c.verdict} [${noteFor(c)}]`;
      });
      lines.push(`| \`${call}\` | ${row.join(" | ")} |`);
    }
    lines.push("");
  }
  const total = (v: Verdict) => cells.filter((c) => c.verdict === v).length;
  lines.push(`Totals: ${cells.length} cells, ${total("ok")} ok, ${total("differs")} differ from e2b cloud, ${total("fails")} fail.`, "");
  if (notes.length) lines.push("Why:", "", ...notes.map((n, i) => `${i + 1}. ${esc(n)}`), "");
  return lines.join("\n");
}

const HEADER = `# SDK matrix

Generated by the SDK suites (do not edit by hand: each suite rewrites its own section between its markers). Each cell
is one call made by the stock client against a local stack, judged against what e2b cloud answers: **ok** is the same
behaviour, **differs** is a behaviour e2b cloud does not have (the note says why), **fails** is a call that does not
work (the suite fails on any). Issue 20 asks for this table.
`;

/** Replaces (or appends) the section between `<!-- matrix:<key> -->` markers in `file`, creating the file if needed. */
export function writeSection(file: string, key: string, section: string): void {
  const begin = `<!-- matrix:${key}:begin -->`;
  const end = `<!-- matrix:${key}:end -->`;
  const block = `${begin}\n${section.trimEnd()}\n${end}`;
  const text = existsSync(file) ? readFileSync(file, "utf8") : HEADER;
  const at = text.indexOf(begin);
  const stop = text.indexOf(end);
  const next = at >= 0 && stop > at ? text.slice(0, at) + block + text.slice(stop + end.length) : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, next.endsWith("\n") ? next : `${next}\n`);
}
