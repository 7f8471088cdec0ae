// The standalone binary (services/sandboxd-sim/main.ts) serving the real flags, as a separate process.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, claim, until } from "./helpers.ts";
import { run } from "#tests/support/run.ts";

const MAIN = join(import.meta.dir, "../../../services/sandboxd-sim/main.ts");
const procs: Bun.Subprocess[] = [];
afterAll(() => {
  for (const p of procs) p.kill();
});

async function runToExit(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = await run(["bun", MAIN, ...args]);
  return { code: r.code, out: r.stdout, err: r.stderr };
}

describe("sandboxd-sim standalone binary", () => {
  test("--help describes it as a development substrate and exits 0; a bad flag exits 2; a missing token file exits 1", async () => {
    const help = await runToExit(["--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toContain("DEVELOPMENT SUBSTRATE standing in for sandboxd");
    for (const flag of ["--listen", "--admin-listen", "--token-file", "--tenant", "--pool", "--max-claims", "--seed", "--provision-latency", "--nodes"]) {
      expect(help.out).toContain(flag);
    }
    const version = await runToExit(["--version"]);
    expect([version.code, version.out.startsWith("sandboxd-sim ")]).toEqual([0, true]);
    expect((await runToExit(["--bogus"])).code).toBe(2);
    expect((await runToExit(["--max-claims", "lots"])).code).toBe(2);
    expect((await runToExit(["--tenant", "no-token"])).code).toBe(2);
    const missing = await runToExit(["--listen", "127.0.0.1:0", "--token-file", "/nonexistent/token"]);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("--token-file");
  });

  test("serves a two-node mesh with the token file, tenants, pools, max-claims, seed and provision latency flags", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sandboxd-sim-"));
    writeFileSync(join(dir, "token"), "file-root\n");
    const p = Bun.spawn(
      ["bun", MAIN, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--token-file", join(dir, "token"),
        "--tenant", "acme=acme-tok:1", "--pool", "base:24.04/none/small=2", "--max-claims", "5", "--seed", "3",
        "--provision-latency", "10ms", "--nodes", "2"],
      { stdout: "pipe", stderr: "inherit" },
    );
    procs.push(p);
    let out = "";
    const reader = p.stdout.getReader();
    void (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        out += new TextDecoder().decode(value);
      }
    })();
    await until(() => out.includes("admin listening"), "the admin listener", 10_000);
    expect(out).toContain("development substrate");
    // It says once which guest sandboxes it runs: as root (CI) the namespaced ones, never the fallback.
    expect(out.match(/guest sandboxes: /g)).toHaveLength(1);
    if (process.getuid?.() === 0) expect(out).toContain("guest sandboxes: own Linux namespaces");
    else expect(out).toContain("guest sandboxes: FALLBACK to process sandboxes");
    const urls = [...out.matchAll(/node \d listening on (http:\/\/\S+)/g)].map((m) => m[1]!);
    const admin = /admin listening on (http:\/\/\S+?)\/_sim\//.exec(out)![1]!;
    expect(urls).toHaveLength(2);
    const [n0, n1] = urls as [string, string];

    expect((await call(n0, "GET", "/v1/info", { token: "file-root" })).status).toBe(200);
    expect((await call(n0, "GET", "/v1/info", { token: "acme-tok" })).status).toBe(403);
    let info: any;
    const deadline = Date.now() + 5_000;
    do {
      info = (await call(n0, "GET", "/v1/info", { token: "file-root" })).json;
      if (info.pools[0].warm === 2) break;
      await Bun.sleep(20);
    } while (Date.now() < deadline);
    expect(info.pools[0]).toMatchObject({ key: { template: "base:24.04", net: "none", size: "small" }, warm: 2, target: 2 });
    expect(info.peers).toEqual([new URL(n1).host]);

    expect((await claim(n0, {}, "acme-tok")).status).toBe(200);
    expect((await claim(n0, { no_redirect: true }, "acme-tok")).json.error).toBe("node claim quota reached: tenant acme at 1 live claims, cap 1");

    const viaAdmin = await call(admin, "POST", "/_sim/setMaxClaims?node=1", { token: "file-root", body: [1] });
    expect(viaAdmin.status).toBe(200);
    await claim(n1, { no_redirect: true }, "file-root");
    expect((await claim(n1, { no_redirect: true }, "file-root")).json.error).toBe("node claim quota reached: 1 live claims, cap 1");
    p.kill("SIGTERM");
    expect(await p.exited).toBe(0);
  });
});
