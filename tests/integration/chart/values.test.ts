// `helm show values` is the operator's reference: it prints every value seed 003 lists, at its seed default, each
// with a comment; and values.schema.json types exactly the keys values.yaml has (a value added without a schema
// entry, or a schema entry for a value that no longer exists, fails here).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { chartDir, helm } from "./helm.ts";

/** Seed 003's chart values table (plus upstream's templateAliases and builds), with its defaults. */
const SEED_VALUES: [string, unknown][] = [
  ["apiserver.image.repository", "ghcr.io/cocoonstack/sandbox-apiserver"],
  ["apiserver.image.tag", "latest"],
  ["apiserver.image.pullPolicy", "IfNotPresent"],
  ["apiserver.replicaCount", 2],
  ["apiserver.securePort", 6443],
  ["apiserver.warmPoolDriver", true],
  ["apiserver.sandboxdToken.secretName", ""],
  ["apiserver.sandboxdToken.key", "token"],
  ["apiserver.e2b.enabled", false],
  ["apiserver.e2b.domain", ""],
  ["apiserver.e2b.namespace", "default"],
  ["apiserver.e2b.envdVersion", ""],
  ["apiserver.e2b.defaultTimeoutSeconds", 0],
  ["apiserver.e2b.port", 8080],
  // Multi-tenant defaults (issue 27 item 3; docs/e2b.md "Quotas"), no longer the seed's 0 = no limit.
  ["apiserver.e2b.defaultQuota.maxSandboxes", 20],
  ["apiserver.e2b.defaultQuota.createsPerSecond", 2],
  ["apiserver.e2b.defaultQuota.maxSnapshots", 10],
  ["apiserver.e2b.defaultQuota.snapshotsPerSecond", 0.2],
  ["apiserver.e2b.apiKeySecret.name", ""],
  ["apiserver.e2b.apiKeySecret.key", "keys"],
  ["apiserver.e2b.envdSecret.value", ""],
  ["apiserver.e2b.envdSecret.secretName", ""],
  ["apiserver.e2b.envdSecret.key", "secret"],
  ["apiserver.e2b.templateAliases", ""],
  ["apiserver.e2b.builds.enabled", false],
  ["apiserver.e2b.builds.parallel", 2],
  ["apiserver.resources", { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "512Mi" } }],
  ["envdProxy.image.repository", "ghcr.io/cocoonstack/sandbox-envd-proxy"],
  ["envdProxy.image.tag", "latest"],
  ["envdProxy.image.pullPolicy", "IfNotPresent"],
  ["envdProxy.replicaCount", 2],
  ["envdProxy.domain", ""],
  ["envdProxy.namespace", ""],
  ["envdProxy.port", 8443],
  ["envdProxy.tlsSecretName", ""],
  ["envdProxy.resources", { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "512Mi" } }],
  ["certManager.enabled", true],
  ["certManager.servingCertSecret", "sandbox-apiserver-serving-certs"],
  ["certManager.caBundle", ""],
];

const get = (obj: unknown, path: string): unknown =>
  path.split(".").reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], obj);

describe("helm show values", () => {
  test("prints values.yaml as written, comments included", async () => {
    const r = await helm(["show", "values", chartDir]);
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd()).toBe(readFileSync(join(chartDir, "values.yaml"), "utf8").trimEnd());
  });

  test("every seed value is there at its seed default", async () => {
    const values = parse((await helm(["show", "values", chartDir])).stdout) as unknown;
    for (const [path, expected] of SEED_VALUES) expect([path, get(values, path)]).toEqual([path, expected]);
  });

  test("every key, or a block it belongs to, has a comment right above it", () => {
    const lines = readFileSync(join(chartDir, "values.yaml"), "utf8").split("\n");
    const commented = (i: number) => i > 0 && /^\s*#/.test(lines[i - 1]!);
    const stack: { indent: number; commented: boolean }[] = [];
    const undocumented: string[] = [];
    lines.forEach((line, i) => {
      const m = /^(\s*)([A-Za-z][A-Za-z0-9]*):(.*)$/.exec(line);
      if (!m) return;
      const indent = m[1]!.length;
      while (stack.length && stack.at(-1)!.indent >= indent) stack.pop();
      const isLeaf = m[3]!.trim() !== "";
      const own = commented(i);
      if (indent > 0 && isLeaf && !own && !stack.some((b) => b.commented)) undocumented.push(`line ${i + 1}: ${line.trim()}`);
      stack.push({ indent, commented: own });
    });
    expect(undocumented).toEqual([]);
  });
});

describe("values.schema.json", () => {
  type Schema = { type?: string; properties?: Record<string, Schema>; additionalProperties?: unknown };

  /** Key paths of an object tree, stopping at maps the chart passes through whole (resources, labels). */
  function valueKeys(obj: Record<string, unknown>, prefix = ""): string[] {
    return Object.entries(obj).flatMap(([k, v]) => {
      const path = `${prefix}${k}`;
      const opaque = k === "resources" || k === "labels";
      return v && typeof v === "object" && !Array.isArray(v) && !opaque
        ? [path, ...valueKeys(v as Record<string, unknown>, `${path}.`)]
        : [path];
    });
  }

  function schemaKeys(s: Schema, prefix = ""): string[] {
    return Object.entries(s.properties ?? {}).flatMap(([k, v]) => {
      const path = `${prefix}${k}`;
      const opaque = k === "resources" || k === "labels" || k === "global";
      return v.properties && !opaque ? [path, ...schemaKeys(v, `${path}.`)] : [path];
    });
  }

  test("types exactly the keys values.yaml has, and closes every block to unknown keys", () => {
    const schema = JSON.parse(readFileSync(join(chartDir, "values.schema.json"), "utf8")) as Schema;
    const values = parse(readFileSync(join(chartDir, "values.yaml"), "utf8")) as Record<string, unknown>;
    expect(schemaKeys(schema).filter((k) => k !== "global").sort()).toEqual(valueKeys(values).sort());
    const open: string[] = [];
    const walk = (s: Schema, path: string) => {
      if (s.type === "object" && s.properties && s.additionalProperties !== false && !/resources|labels$/.test(path)) open.push(path);
      for (const [k, v] of Object.entries(s.properties ?? {})) walk(v, path ? `${path}.${k}` : k);
    };
    walk(schema, "");
    expect(open).toEqual([]);
  });
});
