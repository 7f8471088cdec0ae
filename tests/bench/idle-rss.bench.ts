// Idle resident memory of every binary (issue 13 item 3), compiled (`bun run build`, dist/<name>) and from source
// (`bun services/<name>/main.ts`), each after it has served its start-up and sat idle for a while:
//   - vk-sandbox, sandbox-apiserver, sandbox-envd-proxy: in the full local stack (scripts/stack.ts), a real
//     kube-apiserver, two simulated nodes, the example warm pool; vk-sandbox publishes its inventory every 2 s;
//   - sandbox-e2b: in the mesh stack (scripts/stack.ts --mesh);
//   - the sandboxd simulator: alone (services/sandboxd-sim/main.ts, one pool of 20, no guest agents).
// Baselines in the same run: an idle bun process holding one timer (for the source form) and the same one-line
// program compiled with `bun build --compile` and the flags of scripts/build.ts (for the compiled form): the floor
// any Bun binary pays. Two more compiled programs say which part of a binary's RSS is Bun's own and the prescribed
// libraries': one that serves HTTPS with Bun.serve and makes one fetch over TLS to it, and the same routed by hono
// with a zod schema and a pino log line (docs/performance.md "Idle memory").
// STACK_BINARIES=dist makes the stack start dist/<name> (scripts/stack/binary.ts).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { selfSignedServingCert } from "#shared/tls/index.ts";
import { freePort } from "../e2e/stack/run-stack.ts";
import { startTimed } from "./stack.bench.ts";
import { cores, type Figure } from "./vk-sandbox-pods.bench.ts";

const REPO = join(import.meta.dir, "../..");
const DIST = join(REPO, "dist");
const BINARIES = ["vk-sandbox", "sandbox-apiserver", "sandbox-envd-proxy", "sandbox-e2b", "sandboxd-sim"] as const;
type Binary = (typeof BINARIES)[number];
/** How long each process sits idle after start-up before its RSS is read. */
const SETTLE_MS = 12_000;
const round = (x: number) => Math.round(x * 10) / 10;

export function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** Anonymous (heap, stacks, JIT) and file-backed (the executable's own pages) parts of a process's RSS, MiB. */
export function rssSplit(pid: number): { anon: number; file: number } {
  try {
    const s = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(s)?.[1] ?? NaN);
    return { anon: kb("Anonymous") / 1024, file: (kb("Rss") - kb("Anonymous")) / 1024 };
  } catch {
    return { anon: NaN, file: NaN };
  }
}

/** Every process below `pid`, with its command line. */
function descendants(pid: number): Array<{ pid: number; cmd: string }> {
  const out: Array<{ pid: number; cmd: string }> = [];
  const walk = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const t of tasks) {
      let kids: string[] = [];
      try {
        kids = readFileSync(`/proc/${p}/task/${t}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
      } catch {
        continue;
      }
      for (const k of kids.map(Number)) {
        let cmd = "";
        try {
          cmd = readFileSync(`/proc/${k}/cmdline`, "utf8").replace(/\0/g, " ");
        } catch {
          continue;
        }
        out.push({ pid: k, cmd });
        walk(k);
      }
    }
  };
  walk(pid);
  return out;
}

const isBinary = (cmd: string, name: Binary) => cmd.includes(`/services/${name}/main.ts`) || cmd.split(" ")[0]!.endsWith(`/dist/${name}`);

/** The idle RSS of the binaries a stack runs, in one form. The full stack runs two vk-sandbox: their mean. */
type Mem = { rss: number; anon: number; file: number };
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function stackRss(args: string[], names: Binary[], form: "dist" | "source"): Promise<Partial<Record<Binary, Mem>>> {
  const s = await startTimed(args, form === "dist" ? { STACK_BINARIES: "dist" } : { STACK_BINARIES: "source" });
  try {
    await Bun.sleep(SETTLE_MS);
    const procs = descendants(s.pid);
    const out: Partial<Record<Binary, Mem>> = {};
    for (const name of names) {
      const mine = procs.filter((p) => isBinary(p.cmd, name)).map((p) => ({ rss: rssMiB(p.pid), ...rssSplit(p.pid) }));
      if (mine.length === 0) throw new Error(`the stack ${args.join(" ")} runs no ${name} (${form}): ${procs.map((p) => p.cmd).join("; ")}`);
      out[name] = { rss: mean(mine.map((m) => m.rss)), anon: mean(mine.map((m) => m.anon)), file: mean(mine.map((m) => m.file)) };
    }
    return out;
  } finally {
    await s.stop();
  }
}

async function simRss(form: "dist" | "source"): Promise<Mem> {
  const argv = form === "dist" ? [join(DIST, "sandboxd-sim")] : [process.execPath, join(REPO, "services", "sandboxd-sim", "main.ts")];
  const proc = Bun.spawn([...argv, `--listen=127.0.0.1:${await freePort()}`, "--pool=base=20", "--guests=none"], { stdio: ["ignore", "ignore", "ignore"] });
  try {
    await Bun.sleep(SETTLE_MS);
    if (proc.exitCode !== null) throw new Error(`sandboxd-sim (${form}) exited ${proc.exitCode}`);
    return { rss: rssMiB(proc.pid), ...rssSplit(proc.pid) };
  } finally {
    proc.kill();
    await proc.exited;
  }
}

/** Serves HTTPS (cert and key files from the environment) and fetches itself once over TLS, then idles. */
const TLS_PROGRAM = `
const tls = { cert: await Bun.file(process.env.RSS_CERT).text(), key: await Bun.file(process.env.RSS_KEY).text() };
const server = Bun.serve({ port: 0, hostname: "127.0.0.1", tls, fetch: () => new Response("ok") });
await (await fetch(\`https://127.0.0.1:\${server.port}/\`, { tls: { rejectUnauthorized: false } })).text();
setInterval(() => {}, 1000);
`;
/** The same with the libraries every binary uses: hono routes it, zod checks the reply, pino logs it. */
const LIBRARIES_PROGRAM = `
import { Hono } from "hono";
import pino from "pino";
import { z } from "zod";
const log = pino({}, pino.destination({ dest: 2, sync: true }));
const Reply = z.object({ ok: z.boolean(), n: z.number().int().optional() });
const app = new Hono().get("/", (c) => c.json(Reply.parse({ ok: true })));
const tls = { cert: await Bun.file(process.env.RSS_CERT).text(), key: await Bun.file(process.env.RSS_KEY).text() };
const server = Bun.serve({ port: 0, hostname: "127.0.0.1", tls, fetch: app.fetch });
log.info({ reply: await (await fetch(\`https://127.0.0.1:\${server.port}/\`, { tls: { rejectUnauthorized: false } })).json() }, "served");
setInterval(() => {}, 1000);
`;

/** Bun's floors: one idle timer (from source and compiled), and the two programs above compiled. */
async function floorRss(): Promise<{ source: Mem; dist: Mem; tls: Mem; libraries: Mem }> {
  // In the repository so the library program resolves hono, zod and pino from node_modules.
  const dir = mkdtempSync(join(REPO, ".rss-floor-"));
  try {
    const { certPem, keyPem } = await selfSignedServingCert({ cn: "rss-floor", ips: ["127.0.0.1"] });
    writeFileSync(join(dir, "cert.pem"), certPem);
    writeFileSync(join(dir, "key.pem"), keyPem);
    const env = { ...process.env, RSS_CERT: join(dir, "cert.pem"), RSS_KEY: join(dir, "key.pem") };
    const compile = (name: string, text: string) => {
      const src = join(dir, `${name}.ts`);
      writeFileSync(src, text);
      const exe = join(dir, name);
      // The flags of scripts/build.ts.
      const build = Bun.spawnSync([process.execPath, "build", "--compile", "--minify-syntax", "--bytecode", "--format=esm", src, "--outfile", exe], { stdout: "ignore", stderr: "pipe" });
      if (build.exitCode !== 0) throw new Error(`bun build --compile of the ${name} floor failed: ${build.stderr.toString()}`);
      return { src, exe };
    };
    const idle = compile("idle", "setInterval(() => {}, 1000);\n");
    const tls = compile("tls", TLS_PROGRAM);
    const libraries = compile("libraries", LIBRARIES_PROGRAM);
    const measure = async (argv: string[]) => {
      const p = Bun.spawn(argv, { env, stdio: ["ignore", "ignore", "ignore"] });
      await Bun.sleep(3_000);
      if (p.exitCode !== null) throw new Error(`${argv.join(" ")} exited ${p.exitCode} before it was measured`);
      const r = { rss: rssMiB(p.pid), ...rssSplit(p.pid) };
      p.kill();
      await p.exited;
      return r;
    };
    return { source: await measure([process.execPath, idle.src]), dist: await measure([idle.exe]), tls: await measure([tls.exe]), libraries: await measure([libraries.exe]) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** dist/ is current when every binary exists and none is older than the newest source it is built from. */
function distFresh(): boolean {
  const newest = (dir: string): number => {
    let n = 0;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name === "node_modules") continue;
      const p = join(dir, e.name);
      n = Math.max(n, e.isDirectory() ? newest(p) : e.name.endsWith(".ts") ? statSync(p).mtimeMs : 0);
    }
    return n;
  };
  const src = Math.max(newest(join(REPO, "services")), newest(join(REPO, "shared")));
  return BINARIES.every((b) => existsSync(join(DIST, b)) && statSync(join(DIST, b)).mtimeMs >= src);
}

/** `bun run build` unless dist/ is current: the benches measure the binaries that ship. */
export function ensureBuilt(): void {
  if (distFresh()) return;
  const b = Bun.spawnSync([process.execPath, "run", "build"], { cwd: REPO, stdout: "ignore", stderr: "pipe" });
  if (b.exitCode !== 0) throw new Error(`bun run build failed: ${b.stderr.toString()}`);
}

export async function rssFigures(): Promise<Figure[]> {
  ensureBuilt();
  const floor = await floorRss();
  const figures: Figure[] = [];
  const floorNote = (m: Mem) => `anonymous ${round(m.anon)} MiB, file-backed ${round(m.file)} MiB; compiled with the flags of scripts/build.ts, read after 3 s`;
  figures.push(
    {
      name: "idle RSS: compiled Bun program serving HTTPS (Bun.serve) after one fetch over TLS (Bun's own part of a binary)",
      value: round(floor.tls.rss),
      unit: "MiB",
      command: "bun run bench -- rss (tests/bench/idle-rss.bench.ts)",
      cores,
      baseline: { name: "compiled one-timer Bun program", value: round(floor.dist.rss), unit: "MiB" },
      notes: floorNote(floor.tls),
    },
    {
      name: "idle RSS: the same program routed by hono, with a zod schema and a pino log line (Bun's part plus the prescribed libraries)",
      value: round(floor.libraries.rss),
      unit: "MiB",
      command: "bun run bench -- rss (tests/bench/idle-rss.bench.ts)",
      cores,
      baseline: { name: "compiled Bun program serving HTTPS after one fetch over TLS", value: round(floor.tls.rss), unit: "MiB" },
      notes: floorNote(floor.libraries),
    },
  );
  for (const form of ["dist", "source"] as const) {
    const full = await stackRss([], ["vk-sandbox", "sandbox-apiserver", "sandbox-envd-proxy"], form);
    const mesh = await stackRss(["--mesh"], ["sandbox-e2b"], form);
    const rss = { ...full, ...mesh, "sandboxd-sim": await simRss(form) } as Record<Binary, Mem>;
    const base = floor[form];
    for (const name of BINARIES) {
      const where =
        name === "sandbox-e2b" ? "mesh stack" : name === "sandboxd-sim" ? "alone, one pool of 20, no guests" : name === "vk-sandbox" ? "full stack, mean of its 2 nodes" : "full stack";
      figures.push({
        name: `idle RSS: ${name} (${form === "dist" ? "compiled dist/" + name : "bun services/" + name + "/main.ts"})`,
        value: round(rss[name].rss),
        unit: "MiB",
        command: "bun run bench -- rss (tests/bench/idle-rss.bench.ts)",
        cores,
        baseline: { name: form === "dist" ? "compiled one-timer Bun program" : "bun running a one-timer program", value: round(base.rss), unit: "MiB" },
        anchor: name === "vk-sandbox" ? "upstream Go daemon idles at ~55 MiB (issue 13)" : undefined,
        notes:
          `${where}; read after ${SETTLE_MS / 1000} s idle; ${round(rss[name].rss - base.rss)} MiB above the floor; ` +
          `anonymous ${round(rss[name].anon)} MiB (floor ${round(base.anon)}), file-backed ${round(rss[name].file)} MiB (floor ${round(base.file)}: ` +
          "the executable's own code pages, shared with every process running the same file and reclaimable)",
      });
    }
  }
  return figures;
}

if (import.meta.main) console.log(JSON.stringify(await rssFigures(), null, 2));
