// Human-readable lines for a terminal (sandbox-apiserver.md §9.2: JSON when stderr is not a terminal,
// readable text otherwise). The JSON pino produced is reformatted, so redaction has already happened.
import type { LogDestination } from "./index.ts";

const LEVEL_TEXT: Record<string, string> = { debug: "DEBUG", info: "INFO ", warn: "WARN ", error: "ERROR", fatal: "FATAL", trace: "TRACE" };
const OMIT = new Set(["level", "time", "msg", "name", "err"]);

function render(value: unknown): string {
  if (typeof value === "string") return /[\s"=]/.test(value) || value === "" ? JSON.stringify(value) : value;
  return JSON.stringify(value);
}

/** `08:00:21.123 INFO  [vk-sandbox] claimed pod=default/a claimId=sb_1` */
export function formatPrettyLine(json: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const time = typeof record.time === "string" ? record.time.slice(11, 23) : "";
  const level = LEVEL_TEXT[String(record.level)] ?? String(record.level);
  const name = record.name ? ` [${record.name}]` : "";
  const fields = Object.entries(record)
    .filter(([k]) => !OMIT.has(k))
    .map(([k, v]) => `${k}=${render(v)}`);
  let line = `${time} ${level}${name} ${record.msg ?? ""}${fields.length ? ` ${fields.join(" ")}` : ""}`;
  const err = record.err as { type?: string; message?: string; stack?: string } | undefined;
  if (err) line += `\n  ${err.stack ?? `${err.type ?? "Error"}: ${err.message ?? ""}`}`.replace(/\n/g, "\n  ");
  return `${line}\n`;
}

/** Wraps a destination so each JSON line is written as readable text. */
export function prettyDestination(inner: LogDestination): LogDestination {
  return { write: (line: string) => inner.write(formatPrettyLine(line)) };
}
