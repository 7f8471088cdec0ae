// Issue 17 case 8 / issue 22 case 5: a Bun.serve without `development: false` serves Bun's development error page
// (source lines, file paths, the working directory) for any throw, and without an `error` handler the raw stack
// goes to stderr outside pino. Every Bun.serve call site in services/ and shared/ must set both; the offenders are
// listed by file and line, so a new listener that forgets either fails here, not in production. (The request-shape
// checks before the handler are shared/http's guardRequests; tests/integration/envelopes sends the shapes.)
import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const root = join(import.meta.dir, "..", "..", "..");

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "node_modules" || name === "gen" ? [] : tsFiles(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

/** The text of the call's argument list: from `(` to its matching `)`, strings and comments taken as they come. */
function argumentsAt(src: string, open: number): string {
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    const ch = src[i];
    if (ch === "(") depth++;
    else if (ch === ")" && --depth === 0) return src.slice(open + 1, i);
  }
  return src.slice(open + 1);
}

interface ServeSite {
  where: string;
  missing: string[];
}

/** Every `Bun.serve(` call in `files` with what its options lack. */
function serveSites(files: string[]): ServeSite[] {
  const sites: ServeSite[] = [];
  for (const file of files) {
    const src = readFileSync(file, "utf8");
    for (const m of src.matchAll(/\bBun\.serve\(/g)) {
      const args = argumentsAt(src, m.index + m[0].length - 1);
      const missing: string[] = [];
      if (!/\bdevelopment:\s*false\b/.test(args)) missing.push("development: false");
      if (!/(^|[\s,{])error\s*[:(,]/m.test(args)) missing.push("an error handler");
      const line = src.slice(0, m.index).split("\n").length;
      sites.push({ where: `${relative(root, file)}:${line}`, missing });
    }
  }
  return sites;
}

const sites = serveSites([...tsFiles(join(root, "services")), ...tsFiles(join(root, "shared"))]);

test("the scan finds the product's listeners (relay, e2b surface, metrics, simulator)", () => {
  const files = new Set(sites.map((s) => s.where.replace(/:\d+$/, "")));
  for (const f of ["shared/relay/server.ts", "shared/e2b/index.ts", "shared/http/metrics-listener.ts", "services/sandboxd-sim/guest/server.ts", "shared/secure-front/front.ts"]) expect(files.has(f)).toBe(true);
});

// The secure ports (sandbox-apiserver, the kubelet API) host their Bun.serve in shared/secure-front/front.ts.
test("every Bun.serve in services/ and shared/ sets development: false and an error handler", () => {
  const offenders = sites.filter((s) => s.missing.length > 0).map((s) => `${s.where} lacks ${s.missing.join(" and ")}`);
  expect(offenders).toEqual([]);
});

test("the guard itself: a call without either option is reported, one with both is not", () => {
  const dir = mkdtempSync(join(tmpdir(), "serve-guard-"));
  const probe = (text: string) => {
    const path = join(dir, "probe.ts");
    writeFileSync(path, text);
    return serveSites([path])[0]!.missing;
  };
  expect(probe("Bun.serve({ port: 0, fetch: (r) => f(r) });")).toEqual(["development: false", "an error handler"]);
  expect(probe("Bun.serve({ port: 0, development: false, error: handler(log), fetch });")).toEqual([]);
  expect(probe("Bun.serve({ port: 0, development: false, error(e) { return x(e); }, fetch });")).toEqual([]);
  expect(probe("Bun.serve({ development: true, error, fetch });")).toEqual(["development: false"]);
  rmSync(dir, { recursive: true, force: true });
});
