// The --help text: every flag with its environment variable, default and description, then the
// environment-only settings. One line per flag so `grep` on the output finds a flag and its default.
import type { FlagTable } from "./flags.ts";

export interface EnvOnlySetting {
  env: string;
  default: string;
  help: string;
}

export interface HelpDoc {
  /** Binary name, first word of the usage line. */
  name: string;
  /** One sentence on what the binary is. */
  summary: string;
  table: FlagTable;
  envOnly?: EnvOnlySetting[];
}

function defaultText(spec: FlagTable[string]): string {
  if (spec.defaultLabel !== undefined) return spec.defaultLabel;
  return spec.default === "" ? "none" : spec.default;
}

export function formatHelp(doc: HelpDoc): string {
  const rows: [string, string, string, string][] = [["FLAG", "ENV", "DEFAULT", "DESCRIPTION"]];
  for (const spec of Object.values(doc.table)) {
    const flag = spec.type === "bool" ? `--${spec.flag}` : `--${spec.flag} <${spec.type}>`;
    rows.push([flag, spec.env ?? "-", defaultText(spec), spec.help]);
  }
  rows.push(["--version", "-", "false", "Print the build version and exit"]);
  rows.push(["--help", "-", "false", "Print this flag table and exit"]);
  for (const setting of doc.envOnly ?? []) rows.push(["-", setting.env, setting.default, setting.help]);
  const widths = [0, 1, 2].map((col) => Math.max(...rows.map((row) => row[col]!.length)));
  const lines = rows.map((row) =>
    [row[0]!.padEnd(widths[0]!), row[1]!.padEnd(widths[1]!), row[2]!.padEnd(widths[2]!), row[3]].join("  ").trimEnd(),
  );
  return `${doc.name}: ${doc.summary}\n\nUsage: ${doc.name} [flags]\n\n${lines.join("\n")}\n`;
}
