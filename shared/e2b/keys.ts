// The API key file (docs/e2b.md "Configuration files"): one key per line as
//   key [namespace] [max-sandboxes=N] [creates-per-second=R] [max-snapshots=N] [snapshots-per-second=R]
// A namespace must be a DNS-1123 label (it is stamped as the `<ns>/` claim_ref prefix, and a slash or an empty one
// would merge tenants); quota fields override the --e2b-default-* flags for that namespace (0 = no limit). Every
// problem is a StartupError naming the file and the line.
import { StartupError, dnsLabelProblem } from "../config/index.ts";

/** A namespace's quota; 0 means no limit. */
export interface QuotaLimits {
  maxSandboxes: number;
  createsPerSecond: number;
  /** Snapshots (full-VM checkpoints) the namespace keeps on the fleet; they outlive their sandbox. */
  maxSnapshots: number;
  snapshotsPerSecond: number;
}

/** The key-file field names, in the order a usage message lists them. */
export const QUOTA_FIELDS_USAGE = "key [namespace] [max-sandboxes=N] [creates-per-second=R] [max-snapshots=N] [snapshots-per-second=R]";

export interface KeyFile {
  /** key -> namespace. */
  keys: Map<string, string>;
  /** namespace -> limits, only for namespaces whose lines set one (the rest take the defaults). */
  quotas: Map<string, Partial<QuotaLimits>>;
}

const FLAG = "--e2b-api-key-file";
const count = { parse: (v: string) => (/^\d{1,9}$/.test(v) ? Number(v) : undefined), what: "a whole number >= 0" };
const rate = { parse: (v: string) => (/^\d{1,6}(\.\d{1,6})?$/.test(v) ? Number(v) : undefined), what: "a number >= 0" };
const FIELDS = {
  "max-sandboxes": { key: "maxSandboxes", ...count },
  "creates-per-second": { key: "createsPerSecond", ...rate },
  "max-snapshots": { key: "maxSnapshots", ...count },
  "snapshots-per-second": { key: "snapshotsPerSecond", ...rate },
} as const;

/** Trimmed non-empty lines that are not `#` comments, with their 1-based line numbers. */
export function meaningfulLines(text: string): { n: number; line: string }[] {
  return text
    .split(/\r?\n/)
    .map((raw, i) => ({ n: i + 1, line: raw.trim() }))
    .filter(({ line }) => line !== "" && !line.startsWith("#"));
}

/** Parse the key file; a later line for the same key wins; two lines may not give one namespace different quotas. */
export function parseKeyFile(text: string, defaultNamespace: string, file = "key file"): KeyFile {
  const keys = new Map<string, string>();
  const quotas = new Map<string, Partial<QuotaLimits>>();
  const quotaLine = new Map<string, number>();
  for (const { n, line } of meaningfulLines(text)) {
    const fail = (why: string, detail = "") => new StartupError(`${FLAG}: ${why} on line ${n} of ${file}${detail}`, { flag: FLAG, file, line: n });
    const [key, ...rest] = line.split(/\s+/) as [string, ...string[]];
    let namespace = defaultNamespace;
    if (rest[0] !== undefined && !rest[0].includes("=")) namespace = rest.shift()!;
    const problem = dnsLabelProblem(namespace);
    if (problem) throw fail(`namespace "${namespace}" ${problem}`);
    const limits: Partial<QuotaLimits> = {};
    for (const field of rest) {
      const eq = field.indexOf("=");
      const name = field.slice(0, eq);
      // Own keys only: an inherited name (constructor, __proto__) is as unknown as any other.
      const spec = eq > 0 && Object.hasOwn(FIELDS, name) ? FIELDS[name as keyof typeof FIELDS] : undefined;
      if (!spec) throw fail("malformed entry", `: expected "${QUOTA_FIELDS_USAGE}", got "${field}"`);
      if (limits[spec.key] !== undefined) throw fail(`${name} given twice`);
      const value = spec.parse(field.slice(eq + 1));
      if (value === undefined) throw fail(`${name} must be ${spec.what}`);
      limits[spec.key] = value;
    }
    keys.set(key, namespace);
    if (Object.keys(limits).length === 0) continue;
    const prev = quotas.get(namespace);
    if (prev && (Object.keys(FIELDS) as (keyof typeof FIELDS)[]).some((f) => prev[FIELDS[f].key] !== limits[FIELDS[f].key])) {
      throw fail(`namespace "${namespace}" has other quota values on line ${quotaLine.get(namespace)}`);
    }
    quotas.set(namespace, limits);
    quotaLine.set(namespace, n);
  }
  return { keys, quotas };
}
