// Guards on the shape of the codebase (style item 18): the whole tree type-checks under strict mode, shared code
// never reaches into a service, a folder is entered through its index.ts, and imports across areas use the
// package aliases (#shared/..., #services/..., #tests/..., #scripts/...) rather than ../../../ chains. Each would otherwise only be
// noticed by whoever next reads the code.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";

const root = join(import.meta.dir, "..", "..", "..");

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

test("the whole tree type-checks with tsc in strict mode (zero errors)", () => {
  const tsc = join(root, "node_modules", ".bin", "tsc");
  const run = Bun.spawnSync([tsc, "--noEmit", "-p", root], { cwd: root, stdout: "pipe", stderr: "pipe" });
  const output = run.stdout.toString() + run.stderr.toString();
  expect(output).toBe("");
  expect(run.exitCode).toBe(0);
}, 120_000);

test("no module under shared/ imports from services/", () => {
  const offenders = tsFiles(join(root, "shared")).filter((file) =>
    /^\s*(import|export)\b[^;]*?from\s+["'][^"']*\/services\//m.test(readFileSync(file, "utf8")),
  );
  expect(offenders.map((f) => relative(root, f))).toEqual([]);
});

/** The folder a module belongs to: shared/<x>, services/<svc>/<x>, or the service root services/<svc>. */
function folderOf(path: string): string | undefined {
  const parts = path.split("/");
  if (parts[0] === "shared" && parts.length >= 3) return parts.slice(0, 2).join("/");
  if (parts[0] === "services" && parts.length >= 4) return parts.slice(0, 3).join("/");
  if (parts[0] === "services" && parts.length === 3) return parts.slice(0, 2).join("/");
  return undefined;
}

/** Every relative or aliased module specifier in a file, resolved to a repository path. */
function importsOf(file: string): Array<{ spec: string; target: string }> {
  const src = readFileSync(file, "utf8");
  const out: Array<{ spec: string; target: string }> = [];
  for (const m of src.matchAll(/^\s*(?:import|export)\b[^;]*?from\s+["']([^"']+)["']/gm)) {
    const spec = m[1]!;
    if (spec.startsWith(".")) out.push({ spec, target: relative(root, join(dirname(file), spec)) });
    else if (spec.startsWith("#")) out.push({ spec, target: spec.slice(1) });
  }
  return out;
}

test("code enters another folder only through its index.ts (a subfolder may use its own service's root files)", () => {
  const offenders: string[] = [];
  for (const file of [...tsFiles(join(root, "shared")), ...tsFiles(join(root, "services"))]) {
    const from = relative(root, file);
    const own = folderOf(from);
    for (const { spec, target } of importsOf(file)) {
      const folder = folderOf(target);
      if (!folder || folder === own || (own && own.startsWith(`${folder}/`))) continue;
      if (target !== `${folder}/index.ts`) offenders.push(`${from} imports ${spec}`);
    }
  }
  expect(offenders).toEqual([]);
});

test("imports across shared/, services/, tests/ and scripts/ use the package aliases, and no relative import climbs three levels", () => {
  const areas = ["shared", "services", "tests", "scripts"];
  const offenders: string[] = [];
  for (const area of areas) {
    for (const file of tsFiles(join(root, area))) {
      const from = relative(root, file);
      if (from.startsWith("tests/kube/apiserver/")) continue;
      for (const { spec, target } of importsOf(file)) {
        if (!spec.startsWith(".")) continue;
        const to = target.split("/")[0]!;
        if ((areas.includes(to) && to !== area) || spec.startsWith("../../../")) offenders.push(`${from} imports ${spec}`);
      }
    }
  }
  expect(offenders).toEqual([]);
});

// A folder index loaded first must evaluate on its own: an import cycle through which a module reads another's
// constants at load time only fails when that index is the entry point (bun test loads files in varying orders, so
// the whole suite can pass while one test file run alone throws "Cannot access X before initialization").
test("every folder index.ts loads on its own in a fresh process", async () => {
  const indexes = [...tsFiles(join(root, "shared")), ...tsFiles(join(root, "services"))]
    .filter((f) => f.endsWith("/index.ts") && !f.includes("/node_modules/"))
    .map((f) => relative(root, f));
  expect(indexes.length).toBeGreaterThan(10);
  const failures: string[] = [];
  const queue = [...indexes];
  await Promise.all(
    [0, 1].map(async () => {
      for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
        const proc = Bun.spawn([process.execPath, "-e", `await import(${JSON.stringify(join(root, file))})`], {
          cwd: root,
          stdout: "pipe",
          stderr: "pipe",
        });
        const [err, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
        if (code !== 0) failures.push(`${file}: ${err.split("\n").find((l) => /Error/.test(l)) ?? `exit ${code}`}`);
      }
    }),
  );
  expect(failures).toEqual([]);
}, 120_000);

// package.json "sideEffects" lists the only modules of ours that do something when imported for nothing: with it
// `bun build` leaves out a module none of whose exports a binary uses (sandbox-envd-proxy no longer carries the e2b
// REST app and its schemas; docs/performance.md "Idle memory"). A module imported for its effect alone
// (`import "./x.ts"`) that is not listed would silently vanish from the compiled binaries only.
test("every module of ours imported for its side effect alone is listed in package.json sideEffects", () => {
  const listed = new Set((JSON.parse(readFileSync(join(root, "package.json"), "utf8")).sideEffects as string[]).map((p) => p.replace(/^\.\//, "")));
  const offenders: string[] = [];
  for (const file of [...tsFiles(join(root, "shared")), ...tsFiles(join(root, "services"))]) {
    const from = relative(root, file);
    for (const m of readFileSync(file, "utf8").matchAll(/^\s*import\s+["']([^"']+)["']/gm)) {
      const spec = m[1]!;
      const target = spec.startsWith(".") ? relative(root, join(dirname(file), spec)) : spec.startsWith("#") ? spec.slice(1) : undefined;
      if (target !== undefined && !listed.has(target)) offenders.push(`${from} imports ${spec} for its side effect`);
    }
  }
  expect(offenders).toEqual([]);
  for (const path of listed) expect(statSync(join(root, path)).isFile()).toBe(true);
});
