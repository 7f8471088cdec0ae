// A standalone simulator killed with SIGKILL cannot stop its sandboxes: their namespaces, processes, freezer cgroups
// and layers outlive it. The next simulator started on the same guest directory (--guest-dir) finds and removes
// them (services/sandboxd-sim/guest/reap.ts); checked on the host: no orphan process, no mount naming the dead
// instance's directory in any mount table (/proc/*/mountinfo), no cgroup, no layer directory.
import { waitFor } from "#tests/support/wait.ts";
import { afterAll, expect, test } from "bun:test";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { leftoverPids } from "#services/sandboxd-sim/guest/reap.ts";
import { startRelayFront } from "./relay-front.ts";

const REPO = join(import.meta.dir, "../../../..");
const TOKEN = "reap-root-token";
const AS_ROOT = process.getuid?.() === 0;
// Without root (and without unprivileged user namespaces) the guests are process sandboxes; the namespaced leftovers
// this test is about (PID namespaces, overlays, cgroups) need the namespaced mode, which root always has here.
const nsTest = AS_ROOT ? test : test.skip;

const work = mkdtempSync(join(tmpdir(), "sandboxd-sim-reap-"));
const guestDir = join(work, "guests");
writeFileSync(join(work, "token"), TOKEN);
const started: ChildProcess[] = [];

afterAll(async () => {
  for (const p of started) if (p.exitCode === null && p.signalCode === null) p.kill("SIGTERM");
  await Promise.all(started.map((p) => (p.exitCode === null && p.signalCode === null ? new Promise((r) => p.once("exit", r)) : undefined)));
  rmSync(work, { recursive: true, force: true });
});

async function startSim(): Promise<{ proc: ChildProcess; url: string; out: () => string }> {
  const proc = spawn(process.execPath, ["services/sandboxd-sim/main.ts", "--listen", "127.0.0.1:0", "--token-file", join(work, "token"), "--pool", "base/none/small=1", "--guest-dir", guestDir], {
    cwd: REPO,
    env: { ...process.env, SANDBOXD_SIM_LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  started.push(proc);
  let out = "";
  proc.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  proc.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  const url = await waitFor("the simulator's listening line", () => {
    if (proc.exitCode !== null) throw new Error(`the simulator exited (${proc.exitCode}): ${out}`);
    return /node 0 listening on (http:\/\/\S+)/.exec(out)?.[1];
  }, 30_000);
  return { proc, url, out: () => out };
}

const auth = { authorization: `Bearer ${TOKEN}` };

async function claimBusy(url: string): Promise<{ id: string; token: string }> {
  const r = await fetch(`${url}/v1/claim`, { method: "POST", headers: auth, body: JSON.stringify({ template: "base" }) });
  expect(r.status).toBe(200);
  const c = (await r.json()) as { id: string; token: string };
  // Something running inside that outlives the command that started it, as a server would.
  const e = await fetch(`${url}/v1/sandboxes/${c.id}/exec`, { method: "POST", headers: { authorization: `Bearer ${c.token}` }, body: JSON.stringify({ argv: ["/bin/sh", "-c", "setsid sleep 600 >/dev/null 2>&1 & sleep 601 >/dev/null 2>&1 & echo started"] }) });
  expect(await e.json()).toMatchObject({ exit_code: 0, stdout: "started\n" });
  return c;
}

const alive = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]![0] !== "Z";
  } catch {
    return false;
  }
};

/** Every mount table on the host (each process's) that names `dir`. */
function mountsNaming(dir: string): string[] {
  const hits: string[] = [];
  for (const d of ["self", ...readdirSync("/proc").filter((x) => /^\d+$/.test(x))]) {
    try {
      if (readFileSync(`/proc/${d}/mountinfo`, "utf8").includes(dir)) hits.push(d);
    } catch {
      // exited meanwhile
    }
  }
  return hits;
}

const cgroupsNaming = (base: string) =>
  ["/sys/fs/cgroup/freezer/sandboxd-sim", "/sys/fs/cgroup/sandboxd-sim"].flatMap((p) => (existsSync(p) ? readdirSync(p).filter((n) => n.startsWith(`${base}-`)) : []));

nsTest("a simulator started on the guest directory of one killed with SIGKILL removes its sandboxes' processes, mounts, cgroups and layers", async () => {
  const first = await startSim();
  const ca = await claimBusy(first.url);
  const a = ca.id;
  const b = (await claimBusy(first.url)).id;
  // A relayed port starts a's ports relay (a Bun process in its network namespace): a holder of its own to remove.
  const front = await startRelayFront(first.url, TOKEN, (id) => (id === "a" ? { claimId: ca.id, claimToken: ca.token } : undefined));
  const relayed = await fetch(`${front.url}/`, { headers: { "e2b-sandbox-id": "a", "e2b-sandbox-port": "3000" } });
  expect(relayed.status).toBe(502); // nothing listens on 3000 inside, but the relay is up
  await front.stop();
  // One of them hibernated: its processes are frozen, and a frozen process ignores SIGKILL until thawed.
  expect((await fetch(`${first.url}/v1/sandboxes/${b}/hibernate`, { method: "POST", headers: auth })).status).toBe(204);
  const base = readdirSync(guestDir).find((n) => n.startsWith("sandboxd-sim-guests-"))!;
  const baseDir = join(guestDir, base);
  for (const id of [a, b]) expect(existsSync(join(baseDir, id, "layer"))).toBe(true);
  const pids = await waitFor("both sandboxes' processes", () => {
    const p = leftoverPids(baseDir);
    return p.length >= 6 ? p : undefined; // per sandbox: its unshare holder, PID 1, the two sleeps at least
  });
  expect(pids.some((p) => readFileSync(`/proc/${p}/cmdline`, "utf8").includes("ns-relay.ts"))).toBe(true);
  expect(mountsNaming(baseDir).length).toBeGreaterThan(0); // the sandboxes' own mount namespaces show their overlays

  first.proc.kill("SIGKILL");
  await new Promise((r) => first.proc.once("exit", r));
  // Nothing stopped them: they outlive the simulator.
  await Bun.sleep(200);
  expect(pids.filter(alive).length).toBe(pids.length);

  const second = await startSim();
  expect(second.out()).not.toContain("FALLBACK");
  expect(existsSync(baseDir)).toBe(false);
  await waitFor("every leftover process gone", () => (pids.filter(alive).length === 0 ? true : undefined), 10_000);
  expect(mountsNaming(baseDir)).toEqual([]);
  expect(cgroupsNaming(base)).toEqual([]);
  // The new simulator works on the same directory, with a base directory of its own.
  const c = (await claimBusy(second.url)).id;
  const now = readdirSync(guestDir).filter((n) => n.startsWith("sandboxd-sim-guests-"));
  expect(now.length).toBe(1);
  expect(existsSync(join(guestDir, now[0]!, c))).toBe(true);
}, 90_000);
