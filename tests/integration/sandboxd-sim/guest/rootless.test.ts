// The standalone simulator run as an unprivileged user (a uid with no passwd entry, through setpriv): where the kernel
// allows unprivileged user namespaces with overlay mounts (Linux >= 5.11, user.max_user_namespaces > 0) its guests
// are namespaced, rootless (isolation.ts): each sandbox in its own user, mount, PID, IPC, UTS and network namespaces
// with its own overlay root, the simulator's uid mapped to root inside. Where the kernel forbids that, the guest
// falls back to the process sandbox and says so once: the test then checks that line instead (reason below).
import { waitFor } from "#tests/support/wait.ts";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, copyFileSync, existsSync, linkSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { startRelayFront } from "./relay-front.ts";

const REPO = join(import.meta.dir, "../../../..");
const AS_ROOT = process.getuid?.() === 0;
/** An unused uid (no passwd entry: nothing is added to the host's /etc, which sandboxes copy). */
const UID = 64_000 + Math.floor(Math.random() * 1000);
const ROOT_TOKEN = "rootless-root-token";

/** Run as UID: the simulator and the probe. */
const asUser = (argv: string[]) => ["setpriv", `--reuid=${UID}`, `--regid=${UID}`, "--clear-groups", "--", ...argv];

let work = "";
let sim: ChildProcess | undefined;
let out = "";
/** stdout alone: the startup banner (stderr carries the structured log, which says the same once more). */
let banner = "";
let url = "";
/** Why this host gives an unprivileged user no user namespace with overlay mounts (undefined: it does). */
let forbidden: string | undefined;

function processesOf(uid: number): number[] {
  return readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number).filter((p) => {
    try {
      return statSync(`/proc/${p}`).uid === uid && readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1]![0] !== "Z";
    } catch {
      return false;
    }
  });
}

beforeAll(async () => {
  if (!AS_ROOT) return;
  work = mkdtempSync(join(tmpdir(), "sandboxd-sim-rootless-"));
  chmodSync(work, 0o755);
  chownSync(work, UID, UID);
  // The user cannot reach bun where root keeps it (/root is 0700): a hard link (same filesystem) or a copy it can run.
  const bun = join(work, "bun");
  try {
    linkSync(process.execPath, bun);
  } catch {
    copyFileSync(process.execPath, bun);
    chmodSync(bun, 0o755);
  }
  writeFileSync(join(work, "token"), ROOT_TOKEN);
  chmodSync(join(work, "token"), 0o644);
  const probeDir = join(work, "probe");
  const probe = spawnSync("sh", ["-c", `mkdir -p ${probeDir}/u ${probeDir}/w ${probeDir}/m && ${asUser(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", `mount -t overlay o -o lowerdir=/usr,upperdir=${probeDir}/u,workdir=${probeDir}/w ${probeDir}/m`]).join(" ")}`], { encoding: "utf8" });
  spawnSync("chown", ["-R", `${UID}:${UID}`, work]);
  if (probe.status !== 0) forbidden = `unprivileged user namespaces with overlay mounts are not allowed here: ${probe.stderr.trim()}`;
  rmSync(probeDir, { recursive: true, force: true });
  const argv = asUser([bun, "services/sandboxd-sim/main.ts", "--listen", "127.0.0.1:0", "--token-file", join(work, "token"), "--pool", "base/none/small=1"]);
  sim = spawn(argv[0]!, argv.slice(1), {
    cwd: REPO,
    env: { PATH: process.env.PATH, HOME: work, TMPDIR: work, SANDBOXD_SIM_LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  sim.stdout!.on("data", (c: Buffer) => {
    out += c.toString();
    banner += c.toString();
  });
  sim.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  url = await waitFor("the simulator's listening line", () => {
    if (sim!.exitCode !== null) throw new Error(`the simulator exited (${sim!.exitCode}): ${out}`);
    return /node 0 listening on (http:\/\/\S+)/.exec(out)?.[1];
  }, 30_000).catch((e: Error) => {
    throw new Error(`${e.message}\noutput so far: ${out}`);
  });
}, 60_000);

afterAll(async () => {
  if (sim && sim.exitCode === null) {
    sim.kill("SIGTERM");
    await new Promise((r) => sim!.once("exit", r));
  }
  if (work) rmSync(work, { recursive: true, force: true });
});

const auth = { authorization: `Bearer ${ROOT_TOKEN}` };

async function claim(): Promise<{ id: string; token: string }> {
  const r = await fetch(`${url}/v1/claim`, { method: "POST", headers: auth, body: JSON.stringify({ template: "base" }) });
  expect(r.status).toBe(200);
  return (await r.json()) as { id: string; token: string };
}

async function exec(c: { id: string; token: string }, script: string): Promise<{ exit_code: number; stdout: string; stderr: string }> {
  const r = await fetch(`${url}/v1/sandboxes/${c.id}/exec`, { method: "POST", headers: { authorization: `Bearer ${c.token}` }, body: JSON.stringify({ argv: ["/bin/sh", "-c", script] }) });
  expect(r.status).toBe(200);
  return (await r.json()) as { exit_code: number; stdout: string; stderr: string };
}

// Root is needed to start the simulator as another user; a non-root run of the suite is already the unprivileged case
// and namespaced.test.ts covers what it gives.
const rootTest = AS_ROOT ? test : test.skip;

rootTest("run as an unprivileged user, the simulator's guests are namespaced (rootless), not the fallback, or it says why once", async () => {
  if (forbidden) {
    // This kernel or its sysctl forbids the rootless mode: the fallback must be announced once, with its reason.
    console.log(`rootless mode not available here, fallback checked instead: ${forbidden}`);
    expect(banner.match(/FALLBACK/g)?.length).toBe(1);
    expect(out.match(/FALLBACK/g)?.length).toBeLessThanOrEqual(2); // the banner line and the one structured warning
    return;
  }
  expect(banner).toContain("rootless: one uid");
  expect(out).not.toContain("FALLBACK");
  const a = await claim();
  const b = await claim();
  expect(a.id).not.toBe(b.id);
  const name = `rootless-${randomBytes(5).toString("hex")}`;
  const r = await exec(a, `hostname; id -u; cat /proc/self/uid_map | tr -s ' ' ' '; ls -A /tmp | wc -l; ip -o link | cut -d: -f2 | tr -d ' '; ls /proc | grep -c '^[0-9]'; echo a > /tmp/${name}; pwd`);
  expect(r.stderr).toBe("");
  const [host, uid, map, tmpCount, links, procs, pwd] = r.stdout.trim().split("\n");
  expect(host).toBe(a.id);
  expect(uid).toBe("0");
  expect(map!.trim()).toBe(`0 ${UID} 1`); // root inside is the simulator's uid on the host, and nothing else is mapped
  expect(tmpCount).toBe("0");
  expect(links).toBe("lo");
  expect(Number(procs)).toBeLessThan(10); // its own PID namespace: a few processes, not the host's
  expect(pwd).toBe("/home/user");
  // Its /tmp is its own: not the host's, not another sandbox's.
  expect(existsSync(`/tmp/${name}`)).toBe(false);
  expect((await exec(b, `test -e /tmp/${name} && echo seen || echo unseen`)).stdout).toBe("unseen\n");
  // /etc is the sandbox's own too: useradd works inside and leaves the host's alone.
  const u = await exec(a, "useradd -m frank && getent passwd frank | cut -d: -f1,6");
  expect([u.exit_code, u.stdout]).toEqual([0, "frank:/home/frank\n"]);
  expect(readFileSync("/etc/passwd", "utf8")).not.toContain("frank:");
  // Its loopback is its own, reached through the ports relay it starts in its network namespace (nsenter -U -n).
  const srv = await exec(b, "mkdir -p /tmp/site && echo served-by-b > /tmp/site/index.html && cd /tmp/site && (setsid python3 -m http.server 3000 --bind 127.0.0.1 >/dev/null 2>&1 &) && echo up");
  expect(srv.stdout).toBe("up\n");
  const front = await startRelayFront(url, ROOT_TOKEN, (id) => (id === "b" ? { claimId: b.id, claimToken: b.token } : undefined));
  try {
    const body = await waitFor("port 3000 of the rootless sandbox", async () => {
      const r = await fetch(`${front.url}/index.html`, { headers: { "e2b-sandbox-id": "b", "e2b-sandbox-port": "3000" } }).catch(() => undefined);
      return r?.status === 200 ? r.text() : undefined;
    }, 15_000);
    expect(body).toBe("served-by-b\n");
  } finally {
    await front.stop();
  }
  // A fork child starts from a copy of the layer (an unprivileged cp): it sees the parent's /tmp file and user.
  const fr = await fetch(`${url}/v1/sandboxes/${a.id}/fork`, { method: "POST", headers: auth, body: JSON.stringify({ token: "", count: 1 }) });
  expect(fr.status).toBe(200);
  const child = ((await fr.json()) as { children: { id: string; token: string }[] }).children[0]!;
  expect((await exec(child, `cat /tmp/${name}; id -un frank; hostname`)).stdout).toBe(`a\nfrank\n${child.id}\n`);
  // Release leaves no sandbox directory behind.
  const base = readdirSync(work).find((d) => d.startsWith("sandboxd-sim-guests-"))!;
  expect(existsSync(join(work, base, a.id))).toBe(true);
  expect((await fetch(`${url}/v1/sandboxes/${a.id}/release`, { method: "POST", headers: auth })).status).toBe(204);
  await waitFor("the released sandbox's directory removed", () => !existsSync(join(work, base, a.id)));
  // Stopping the simulator leaves none of its processes (the sandboxes' included) running as that uid.
  sim!.kill("SIGTERM");
  await new Promise((res) => sim!.once("exit", res));
  await waitFor("no process of the simulator's uid left", () => (processesOf(UID).length === 0 ? true : undefined), 15_000);
}, 60_000);
