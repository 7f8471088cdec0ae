// The parts of a Markdown document a test reads a claim from: one section by its heading, and the pipe tables in it
// (GitHub's syntax: a header row, a delimiter row, body rows). Enough for this repository's own docs, not a parser
// of Markdown at large: a pipe inside a cell must be escaped (`\|`), as GitHub requires too.

export interface MarkdownTable {
  header: string[];
  rows: string[][];
  /** The paragraph right before the table (its lead-in), lines joined by spaces; empty when a heading or nothing precedes it. */
  lead: string;
}

/** The text under the heading whose title is `title` (any level), up to the next heading of the same or a higher level. */
export function section(md: string, title: string): string {
  const lines = md.split("\n");
  const at = lines.findIndex((l) => /^#{1,6} /.test(l) && l.replace(/^#+ /, "").trim() === title);
  if (at < 0) throw new Error(`no heading "${title}" in the document`);
  const level = lines[at]!.match(/^#+/)![0].length;
  const end = lines.findIndex((l, i) => i > at && /^#{1,6} /.test(l) && l.match(/^#+/)![0].length <= level);
  return lines.slice(at + 1, end < 0 ? undefined : end).join("\n");
}

function cells(line: string): string[] {
  const inner = line.trim().replace(/^\|/, "").replace(/\|$/, "");
  return inner.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

const DELIMITER = /^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;

/** Every table in `md`, in order. */
export function tables(md: string): MarkdownTable[] {
  const lines = md.split("\n");
  const out: MarkdownTable[] = [];
  let paragraph: string[] = [];
  let previous: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim().startsWith("|") && DELIMITER.test(lines[i + 1] ?? "")) {
      const header = cells(line);
      const rows: string[][] = [];
      let j = i + 2;
      for (; j < lines.length && lines[j]!.trim().startsWith("|"); j++) rows.push(cells(lines[j]!));
      out.push({ header, rows, lead: (paragraph.length ? paragraph : previous).join(" ") });
      i = j - 1;
      paragraph = [];
      previous = [];
      continue;
    }
    if (/^#{1,6} /.test(line)) {
      paragraph = [];
      previous = [];
    } else if (!line.trim()) {
      if (paragraph.length) previous = paragraph;
      paragraph = [];
    } else paragraph.push(line.trim());
  }
  return out;
}

/** The one table in `md` whose header is exactly `header`; throws naming what it found otherwise. */
export function tableWithHeader(md: string, header: string[]): MarkdownTable {
  const all = tables(md);
  const hits = all.filter((t) => t.header.join("|") === header.join("|"));
  if (hits.length !== 1) {
    throw new Error(`expected one table headed | ${header.join(" | ")} |, found ${hits.length} (headers: ${all.map((t) => t.header.join(" | ")).join("; ")})`);
  }
  return hits[0]!;
}

/** A cell's text without Markdown code spans' backticks. */
export const plain = (cell: string): string => cell.replace(/`/g, "");

/** The first code span of a cell (`name` in "`name` (driver only)"), or the whole cell when it has none. */
export function firstCode(cell: string): string {
  return cell.match(/`([^`]+)`/)?.[1] ?? cell.trim();
}
