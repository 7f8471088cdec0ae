// Label and field selectors with the Kubernetes syntax, evaluated against a synthesized Sandbox. A selector that does
// not parse (an image reference as a label value: `/` and `:` are invalid there) is a 400, as the real apiserver
// answers; so is a field selector on a field this resource does not index.
import type { Sandbox } from "../sandboxes/index.ts";

export class SelectorError extends Error {
  override name = "SelectorError";
}

type Requirement =
  | { key: string; op: "=" | "!="; values: [string] }
  | { key: string; op: "in" | "notin"; values: string[] }
  | { key: string; op: "exists" | "!" };

export interface LabelSelector {
  matches(labels: Record<string, string> | undefined): boolean;
  empty: boolean;
}

const NAME_RE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$/;
const DNS_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const VALUE_RE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function checkKey(key: string): void {
  const slash = key.indexOf("/");
  const prefix = slash >= 0 ? key.slice(0, slash) : "";
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (slash >= 0 && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN_RE.test(prefix))) {
    throw new SelectorError(`invalid label key "${key}": prefix must be a DNS-1123 subdomain`);
  }
  if (name.length === 0 || name.length > 63 || !NAME_RE.test(name)) {
    throw new SelectorError(
      `invalid label key "${key}": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
  }
}

function checkValue(key: string, value: string): void {
  if (value.length > 63 || !VALUE_RE.test(value)) {
    throw new SelectorError(
      `invalid label value: "${value}" for key "${key}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
  }
}

/** Splits at commas that are not inside parentheses. */
function splitTerms(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of s) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      out.push(cur);
      cur = "";
    } else cur += ch;
  }
  out.push(cur);
  return out;
}

export function parseLabelSelector(raw: string | undefined): LabelSelector {
  const reqs: Requirement[] = [];
  const text = (raw ?? "").trim();
  if (text) {
    for (const termRaw of splitTerms(text)) {
      const term = termRaw.trim();
      if (!term) throw new SelectorError(`unable to parse requirement: empty term in "${text}"`);
      let m: RegExpExecArray | null;
      if ((m = /^([^\s!=(),]+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term))) {
        const key = m[1]!;
        checkKey(key);
        const values = m[3]!.split(",").map((v) => v.trim());
        for (const v of values) checkValue(key, v);
        reqs.push({ key, op: m[2] as "in" | "notin", values });
      } else if ((m = /^([^\s!=(),]+)\s*(==|=|!=)\s*(.*)$/.exec(term))) {
        const key = m[1]!;
        const value = m[3]!.trim();
        checkKey(key);
        checkValue(key, value);
        reqs.push({ key, op: m[2] === "!=" ? "!=" : "=", values: [value] });
      } else if ((m = /^!\s*([^\s!=(),]+)$/.exec(term))) {
        checkKey(m[1]!);
        reqs.push({ key: m[1]!, op: "!" });
      } else if ((m = /^([^\s!=(),]+)$/.exec(term))) {
        checkKey(m[1]!);
        reqs.push({ key: m[1]!, op: "exists" });
      } else {
        throw new SelectorError(`unable to parse requirement: "${term}"`);
      }
    }
  }
  return {
    empty: reqs.length === 0,
    matches(labels) {
      const l = labels ?? {};
      return reqs.every((r) => {
        const has = Object.prototype.hasOwnProperty.call(l, r.key);
        const v = l[r.key];
        switch (r.op) {
          case "=":
            return has && v === r.values[0];
          case "!=":
            return !has || v !== r.values[0];
          case "in":
            return has && r.values.includes(v!);
          case "notin":
            return !has || !r.values.includes(v!);
          case "exists":
            return has;
          case "!":
            return !has;
        }
      });
    },
  };
}

const FIELDS = {
  "metadata.name": (s: Sandbox) => s.metadata.name ?? "",
  "metadata.namespace": (s: Sandbox) => s.metadata.namespace ?? "",
  "status.nodeName": (s: Sandbox) => s.status.nodeName ?? "",
} as const;
type FieldName = keyof typeof FIELDS;

export interface FieldSelector {
  matches(s: Sandbox): boolean;
  /** The exact `metadata.name` the selector requires, if any (a pinned list/watch). */
  exactName: string | undefined;
  empty: boolean;
}

export function parseFieldSelector(raw: string | undefined): FieldSelector {
  const reqs: { field: FieldName; negate: boolean; value: string }[] = [];
  const text = (raw ?? "").trim();
  if (text) {
    for (const termRaw of text.split(",")) {
      const term = termRaw.trim();
      const m = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
      if (!m) throw new SelectorError(`invalid field selector: "${term}": expected <field>=<value> or <field>!=<value>`);
      const field = m[1]!.trim();
      if (!(field in FIELDS)) throw new SelectorError(`field selector "${field}" is not supported on sandboxes`);
      reqs.push({ field: field as FieldName, negate: m[2] === "!=", value: m[3]!.trim() });
    }
  }
  const exact = reqs.filter((r) => r.field === "metadata.name" && !r.negate).map((r) => r.value);
  return {
    empty: reqs.length === 0,
    exactName: exact.length > 0 ? exact[0] : undefined,
    matches: (s) => reqs.every((r) => (FIELDS[r.field](s) === r.value) !== r.negate),
  };
}
