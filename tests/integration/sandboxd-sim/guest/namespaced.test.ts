// The namespaced guest (services/sandboxd-sim/guest/namespace.ts), driven by the stock e2b SDK (2.51.0) through
// the simulated node's ports relay: a sandbox looks like a small Linux machine of its own — its own /, /tmp,
// /root, /home/user and /etc (an overlay over the host's system directories), its own PID, IPC, UTS and (on the
// `none` lane) network namespaces, `user` (uid 1000) by default and `root` when the SDK names it.
// The same scenarios with the stock Python SDK, on both stacks: tests/e2e/python/guest-machine.test.ts.
//
// These tests need the namespaced mode. As root (CI runs as root) it must be active: the first test fails, not
// skips, if the guest fell back to the process sandbox. Not root: they skip, naming why, in the code below.
import { waitFor } from "#tests/support/wait.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createHash, randomBytes } from "node:crypto";
import { spawn } from "node:child_process";
import { Sandbox } from "e2b";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { LIST_MAX_ENTRIES, MAX_RECURSIVE_WATCH_DIRS, MAX_WATCHES } from "#services/sandboxd-sim/guest/filesystem-service.ts";
import { startRelayFront, type FrontRoute, type RelayFront } from "./relay-front.ts";

const ROOT = "ns-root-token";
const ENVD = 49983;
const AS_ROOT = process.getuid?.() === 0;
// These assert root's namespaced sandbox (uid 1000 for `user`, a freezer cgroup). Without root the guest is rootless
// (one uid inside, no freezer: rootless.test.ts covers it) or the fallback: neither gives what these check.
const nsTest = AS_ROOT ? test : test.skip;

let sim: SandboxdSim;
let front: RelayFront;
const routes = new Map<string, FrontRoute>();
const auth = { authorization: `Bearer ${ROOT}` };

interface Made {
  sb: Sandbox;
  claimId: string;
  /** The sandbox's directory on the host (its layer lives in it). */
  dir: string;
}

function sdkFor(publicId: string, accessToken: string): Sandbox {
  const Ctor = Sandbox as unknown as new (o: Record<string, unknown>) => Sandbox;
  return new Ctor({ sandboxId: publicId, envdAccessToken: accessToken, envdVersion: "0.8.0", sandboxUrl: front.url, domain: "sim.test", apiKey: "unused" });
}

/** Route a claim through the front and /init it with its access token, as the e2b surface does. */
async function adopt(claim: { id: string; token: string }, accessToken: string, initBody: Record<string, unknown> = { defaultUser: "user", defaultWorkdir: "/home/user" }): Promise<Made> {
  const publicId = claim.id.replace("_", "-");
  routes.set(publicId, { claimId: claim.id, claimToken: claim.token });
  const init = await fetch(`${front.url}/init`, {
    method: "POST",
    headers: { "e2b-sandbox-id": publicId, "e2b-sandbox-port": String(ENVD) },
    body: JSON.stringify({ accessToken, ...initBody }),
  });
  expect(init.status).toBe(204);
  return { sb: sdkFor(publicId, accessToken), claimId: claim.id, dir: join(sim.node.guestHost!.baseDir, claim.id) };
}

async function newSandbox(accessToken: string, body: Record<string, unknown> = { template: "base" }, initBody?: Record<string, unknown>): Promise<Made> {
  const r = await fetch(`${sim.url}/v1/claim`, { method: "POST", headers: auth, body: JSON.stringify(body) });
  expect(r.status).toBe(200);
  return adopt((await r.json()) as { id: string; token: string }, accessToken, initBody);
}

const post = (claimId: string, verb: string, body?: unknown) =>
  fetch(`${sim.url}/v1/sandboxes/${claimId}/${verb}`, { method: "POST", headers: auth, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

const out = async (sb: Sandbox, cmd: string, o: { user?: "root" | "user"; cwd?: string } = {}) => (await sb.commands.run(cmd, o)).stdout.trim();

/** Every host pid whose mount namespace still shows `dir` mounted, and every line of the host's own mount table naming it. */
function mountsNaming(dir: string): string[] {
  const hits: string[] = [];
  for (const line of readFileSync("/proc/mounts", "utf8").split("\n")) if (line.includes(dir)) hits.push(`host: ${line}`);
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/mountinfo`, "utf8").includes(dir)) hits.push(`pid ${d}`);
    } catch {
      // exited meanwhile
    }
  }
  return hits;
}

/** Host pids whose command line or working directory names `dir` (what a leaked sandbox process would show). */
function processesNaming(dir: string): number[] {
  const pids: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, "utf8");
      if (cmd.includes(dir)) pids.push(Number(d));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

// A host secret under /etc (root's alone, and a file in a directory only root may enter), made before any layer.
const SECRET = `sim-secret-${randomBytes(6).toString("hex")}`;
beforeAll(async () => {
  if (AS_ROOT) {
    writeFileSync(`/etc/${SECRET}`, "host key material", { mode: 0o600 });
    mkdirSync(`/etc/${SECRET}.d`, { mode: 0o700 });
    writeFileSync(`/etc/${SECRET}.d/wifi.conf`, "psk=host", { mode: 0o644 });
  }
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["base/none/small=2", "base/egress/small=1"], guestAgents: true });
  front = await startRelayFront(sim.url, ROOT, (id) => routes.get(id));
});
afterAll(async () => {
  await front.stop();
  await sim.stop();
  rmSync(`/etc/${SECRET}`, { force: true });
  rmSync(`/etc/${SECRET}.d`, { recursive: true, force: true });
});

describe("a namespaced sandbox is a small machine of its own", () => {
  test("as root (CI) the namespaced mode is active, not the process-sandbox fallback", () => {
    if (!AS_ROOT) return; // the fallback is the expected mode without root (isolation.ts)
    expect(sim.node.guestHost!.isolation).toEqual({ mode: "namespaces" });
  });

  nsTest("pwd is /home/user; commands run as user (uid 1000) unless the SDK names root; the hostname is the sandbox id", async () => {
    const { sb, claimId } = await newSandbox("tok-who");
    expect(await out(sb, "pwd")).toBe("/home/user");
    expect(await out(sb, "id -u; id -un; echo $HOME")).toBe("1000\nuser\n/home/user");
    expect(await out(sb, "id -u; echo $HOME; pwd", { user: "root" })).toBe("0\n/root\n/home/user");
    expect(await out(sb, "hostname; cat /etc/hostname; getent hosts " + claimId + " | cut -f1 -d' '")).toBe(`${claimId}\n${claimId}\n127.0.1.1`);
    // A file the SDK writes as the default user is that user's to change in a command.
    await sb.files.write("notes/a.txt", "one");
    expect(await out(sb, "echo two >> notes/a.txt && stat -c %U notes notes/a.txt && cat notes/a.txt")).toBe("user\nuser\nonetwo");
  });

  nsTest("cwd /tmp works; /tmp is the sandbox's own: absent in another sandbox and on the host, and the host's /tmp and /root are invisible", async () => {
    const a = await newSandbox("tok-tmp-a");
    const b = await newSandbox("tok-tmp-b");
    const name = `ns-test-${randomBytes(6).toString("hex")}`;
    expect(await out(a.sb, `echo from-a > ${name}; pwd`, { cwd: "/tmp" })).toBe("/tmp");
    expect(await a.sb.files.read(`/tmp/${name}`)).toBe("from-a\n");
    expect(await b.sb.files.exists(`/tmp/${name}`)).toBe(false);
    expect(existsSync(`/tmp/${name}`)).toBe(false);
    // The host's own files stay outside.
    writeFileSync(`/tmp/${name}.host`, "host tmp");
    writeFileSync(`/root/${name}.host`, "host root");
    try {
      expect(await out(a.sb, `ls -A /tmp; test -e /tmp/${name}.host || echo no-tmp; test -e /root/${name}.host || echo no-root`, { user: "root" })).toBe(`${name}\nno-tmp\nno-root`);
      expect(await a.sb.files.exists(`/root/${name}.host`)).toBe(false);
      // Nor does one sandbox see another's layer or the simulator's directories anywhere in its tree.
      expect(await out(a.sb, `find / -xdev -name '${name}*' 2>/dev/null`, { user: "root" })).toBe(`/tmp/${name}`);
    } finally {
      rmSync(`/tmp/${name}.host`, { force: true });
      rmSync(`/root/${name}.host`, { force: true });
    }
  });

  nsTest("/etc is the sandbox's own: useradd, chown and su act inside it and the host's /etc is untouched", async () => {
    const { sb, dir } = await newSandbox("tok-users");
    const r = await out(sb, "useradd -m -s /bin/bash alice && id -u alice && touch /home/user/f && chown alice /home/user/f && stat -c %U /home/user/f && su alice -c 'id -un; echo $HOME'", { user: "root" });
    expect(r).toBe("1001\nalice\nalice\n/home/alice");
    expect(readFileSync("/etc/passwd", "utf8")).not.toContain("alice:");
    // The change is in the sandbox's layer (the upper layer of its /etc).
    expect(readFileSync(join(dir, "sys", "etc", "up", "passwd"), "utf8")).toContain("alice:x:1001:");
    const listed = await sb.files.list("/home/user");
    expect(listed.find((e) => e.name === "f")?.owner).toBe("alice");
    // The default user cannot write the system directories.
    const denied = await sb.commands.run("touch /usr/x", {}).catch((e: Error) => e);
    expect(denied).toBeInstanceOf(Error);
  });

  nsTest("two sandboxes both serve port 3000; each one's port 3000 reaches its own server; only lo is in the namespace", async () => {
    const a = await newSandbox("tok-port-a");
    const b = await newSandbox("tok-port-b");
    for (const [m, text] of [[a, "served by A"], [b, "served by B"]] as const) {
      await m.sb.files.write("site/index.html", text);
      await m.sb.commands.run("cd site && exec python3 -m http.server 3000 --bind 127.0.0.1", { background: true, timeoutMs: 0 });
    }
    const get = (m: Made, token: string) =>
      waitFor(`port 3000 of ${m.claimId}`, async () => {
        const r = await fetch(`${front.url}/index.html`, { headers: { "e2b-sandbox-id": m.sb.sandboxId, "e2b-sandbox-port": "3000", "x-access-token": token } }).catch(() => undefined);
        return r?.status === 200 ? r.text() : undefined;
      }, 15_000);
    expect(await get(a, "tok-port-a")).toBe("served by A");
    expect(await get(b, "tok-port-b")).toBe("served by B");
    expect(await out(a.sb, "ip -o link | cut -d: -f2 | tr -d ' '")).toBe("lo");
    // A port nobody listens on inside is the relay's 502, not a hang.
    const none = await fetch(`${front.url}/`, { headers: { "e2b-sandbox-id": a.sb.sandboxId, "e2b-sandbox-port": "3001", "x-access-token": "tok-port-a" } });
    expect(none.status).toBe(502);
    // The relay that reached them runs in the sandbox's network namespace only: its processes do not see it.
    expect(await out(a.sb, "ps -eo args", { user: "root" })).not.toContain("ns-relay");
  });

  nsTest("root inside stays inside (issue 27): a chroot escape, mknod, a remount and writes to the host kernel's /proc/sys are refused; the host's /etc/shadow is out of reach", async () => {
    const { sb } = await newSandbox("tok-escape");
    const marker = `escape-${randomBytes(6).toString("hex")}`;
    // The classic escape of a chroot: chroot into a subdirectory while the working directory stays outside it, climb
    // with "..", chroot there. With CAP_SYS_CHROOT it reaches the mount namespace's real root, which is the host's.
    const escape = [
      "import os",
      "os.makedirs('/tmp/jail', exist_ok=True)",
      "try:",
      "    os.chroot('/tmp/jail')",
      "except OSError as e:",
      "    print('chroot refused', e.errno); raise SystemExit(0)",
      "for _ in range(64): os.chdir('..')",
      "os.chroot('.')",
      `open('/tmp/${marker}', 'w').write('escaped')`,
      "print('escaped', open('/etc/shadow').read().split(':')[1][:3])",
    ].join("\n");
    await sb.files.write("/tmp/escape.py", escape);
    try {
      expect(await out(sb, "python3 /tmp/escape.py", { user: "root" })).toBe("chroot refused 1");
      expect(existsSync(`/tmp/${marker}`)).toBe(false);
      // No device node (a host disk read raw), no mount (a host directory bound in), no host sysctl (core_pattern runs
      // a program as the host's root), no sysrq; each refusal leaves the host as it was.
      const refused = await sb.commands.run(
        "mknod /tmp/sda b 8 0 2>&1; mount -t tmpfs x /mnt 2>&1; mount --bind / /mnt 2>&1; " +
          "echo 1 > /proc/sys/kernel/core_uses_pid 2>&1; echo h > /proc/sysrq-trigger 2>&1; echo done",
        { user: "root" },
      );
      // (A failed redirection is the shell's own complaint, on its stderr.)
      const said = `${refused.stdout}${refused.stderr}`;
      for (const what of [/mknod: .*Operation not permitted/, /mount: \/mnt: permission denied/, /core_uses_pid: Read-only file system/, /sysrq-trigger: (Read-only file system|No such file or directory)/]) expect(said).toMatch(what);
      // (A kernel built without sysrq has no /proc/sysrq-trigger.)
      expect(said.split("\n").filter((l) => /Operation not permitted|Read-only file system|permission denied|No such file/i.test(l))).toHaveLength(5);
      expect(refused.stdout.trim().endsWith("done")).toBe(true);
      // Inside, /etc/shadow is the sandbox's own copy, with no host password hash in it (layer.ts seedUsers).
      const hostHashes = readFileSync("/etc/shadow", "utf8").split("\n").map((l) => l.split(":")[1] ?? "").filter((h) => h.startsWith("$"));
      const inside = await out(sb, "cat /etc/shadow", { user: "root" });
      for (const h of hostHashes) expect(inside).not.toContain(h);
      // Root's ordinary work inside still works: own files, chown, a user, packages' files under /usr (copied up).
      expect(await out(sb, "touch /usr/local/bin/t && chown 1000:1000 /tmp/escape.py && stat -c %u /tmp/escape.py && useradd -m bob && id -u bob >/dev/null && echo ok", { user: "root" })).toBe("1000\nok");
    } finally {
      rmSync(`/tmp/${marker}`, { force: true });
    }
  });

  nsTest("the files API resolves a sandbox's links inside it (issue 27): a link to a host file reads and writes the sandbox's own, never the host's", async () => {
    const { sb } = await newSandbox("tok-links");
    const name = `links-${randomBytes(6).toString("hex")}`;
    writeFileSync(`/root/${name}.secret`, "host secret");
    try {
      // `user` (uid 1000) makes the links; the files API acts as the host's root.
      await sb.commands.run(`ln -s /root/${name}.secret ~/read-link; ln -s /root/${name}.written ~/write-link; ln -s ../../../../../../root ~/up; ln -s /etc ~/etc-link`);
      // The link is there (stat is an lstat, as envd's), but what it names is the sandbox's /root/…, which has no such file.
      expect(await sb.files.exists("read-link")).toBe(true);
      expect(await sb.files.read("read-link").catch((e: Error) => e.name)).toBe("FileNotFoundError");
      expect(await sb.files.read(`up/${name}.secret`).catch((e: Error) => e.name)).toBe("FileNotFoundError");
      await sb.files.write("write-link", "through the link");
      expect(existsSync(`/root/${name}.written`)).toBe(false);
      expect(await out(sb, `cat /root/${name}.written`, { user: "root" })).toBe("through the link");
      // A link inside the sandbox still works as a link: /etc through etc-link is the sandbox's own /etc.
      expect((await sb.files.read("etc-link/hostname")).trim()).toBe((await out(sb, "hostname")).trim());
      // remove acts on the link, not on what it names.
      await sb.files.remove("etc-link");
      expect(await out(sb, "test -L ~/etc-link || echo gone; test -f /etc/hostname && echo kept")).toBe("gone\nkept");
      expect(readFileSync(`/root/${name}.secret`, "utf8")).toBe("host secret");
    } finally {
      rmSync(`/root/${name}.secret`, { force: true });
      rmSync(`/root/${name}.written`, { force: true });
    }
  });

  nsTest("the egress lane shares the host's network (a host listener is reachable inside) but keeps its own root", async () => {
    const e = await newSandbox("tok-egress", { template: "base", net: "egress" });
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("from the host") });
    try {
      expect(await out(e.sb, `python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:${server.port}/').read().decode())"`)).toBe("from the host");
      expect(await out(e.sb, "pwd; ls -A /tmp | wc -l")).toBe("/home/user\n0");
    } finally {
      await server.stop(true);
    }
  });

  nsTest("the files API does not reach the sandbox's /proc, where it would act with the host root's capabilities", async () => {
    // The files API runs as the host's root with every capability, through PID 1's root: in the sandbox's /proc it
    // wrote what a capability guards and root inside lacks. CAP_SYS_NICE here (another process's timer slack: harmless
    // to show); the same write reaches /proc/<pid>/autogroup (a nice of -20 for the sandbox against every host
    // session), oom_score_adj (CAP_SYS_RESOURCE: exempt from the host's OOM killer) and /proc/mtrr (CAP_SYS_ADMIN).
    const { sb, claimId } = await newSandbox("tok-proc");
    await sb.commands.run("sleep 600", { background: true, timeoutMs: 0 });
    const pid = await out(sb, "pgrep -n -x sleep", { user: "root" });
    expect(pid).toMatch(/^\d+$/);
    const slack = `/proc/${pid}/timerslack_ns`;
    // The same process seen from the host, to read its slack where it is allowed.
    const nsPid = (p: number) => /^NSpid:.*\s(\d+)$/m.exec(readFileSync(`/proc/${p}/status`, "utf8"))?.[1];
    const hostPid = sim.node.guestHost!.get(claimId)!.ns!.pids().find((p) => nsPid(p) === pid);
    expect(hostPid).toBeDefined();
    const hostSlack = () => readFileSync(`/proc/${hostPid}/timerslack_ns`, "utf8").trim();
    const before = hostSlack();
    expect(before).not.toBe("12345");
    // Root inside may not (no CAP_SYS_NICE in its bounding set).
    expect(await out(sb, `echo 12345 > ${slack} 2>/dev/null || echo refused`, { user: "root" })).toBe("refused");
    const refusal = await sb.files.write(slack, "12345").then(
      () => "written",
      (e: Error) => e.message,
    );
    expect(refusal).toContain("not reached by the files API");
    expect(hostSlack()).toBe(before);
    // Through a link too, and for every files call: read, list, stat.
    for (const call of [() => sb.files.read("/dev/fd/../../proc/1/status"), () => sb.files.list("/proc"), () => sb.files.getInfo("/proc/self")]) {
      expect(await call().then(() => "served", (e: Error) => e.message)).toContain("not reached by the files API");
    }
    // Commands still read the sandbox's own /proc, as the user they run as.
    expect(await out(sb, "head -1 /proc/1/status")).toStartWith("Name:");
  });

  nsTest("root inside cannot end the sandbox's PID 1, and once it is gone its number, reused by a host process, never becomes the sandbox", async () => {
    // The simulator reaches a sandbox through /proc/<pid 1>/root and nsenter -t <pid 1>. PID 1 trapped TERM, so root
    // inside could end it; its number was then free, and a host process given it (pids wrap at pid_max, 32768 here)
    // became the sandbox: the files API read and wrote the host's files through its root as the host's root
    // (reproduced: /etc/hostname read "vm", an upload landed in the host's /tmp), commands entered its namespaces.
    const { sb, claimId } = await newSandbox("tok-pid1");
    const ns = sim.node.guestHost!.get(claimId)!.ns!;
    const pid1 = Number(/^\/proc\/(\d+)\/root$/.exec(ns.rootPath)![1]);
    // Every signal root inside may send its PID 1 (dash, waiting, handled INT: that one ended it).
    await sb.commands.run("for s in $(seq 1 31); do kill -$s 1 2>/dev/null; done; true", { user: "root" });
    expect(await out(sb, "echo still here")).toBe("still here");
    expect(existsSync(`/proc/${pid1}`)).toBe(true);
    // Ended from the host (as the host's OOM killer would), its number then handed to a host process (ns_last_pid
    // forces what a tenant forking in another sandbox gets by chance).
    process.kill(pid1, "SIGKILL");
    await waitFor("the sandbox's PID 1 gone", () => !existsSync(`/proc/${pid1}`));
    let squatter: ReturnType<typeof Bun.spawn> | undefined;
    try {
      for (let i = 0; i < 50 && squatter?.pid !== pid1; i++) {
        squatter?.kill();
        writeFileSync("/proc/sys/kernel/ns_last_pid", String(pid1 - 1));
        squatter = Bun.spawn(["sleep", "60"]);
      }
      expect(squatter!.pid).toBe(pid1);
      const read = await sb.files.read("/etc/hostname").then((t) => `read: ${t}`, (e: Error) => e.message);
      expect(read).toContain("ended: its init process is gone");
      const name = `pid1-${randomBytes(6).toString("hex")}`;
      const written = await sb.files.write(`/tmp/${name}`, "x").then(() => "written", (e: Error) => e.message);
      expect(written).toContain("ended: its init process is gone");
      expect(existsSync(`/tmp/${name}`)).toBe(false);
      const ran = await sb.commands.run("cat /etc/hostname", { user: "root", cwd: "/" }).then((r) => `ran: ${r.stdout}`, (e: Error) => e.message);
      expect(ran).toContain("ended: its init process is gone");
      // Releasing it kills no host process that inherited the number.
      await sim.node.guestHost!.get(claimId)!.destroy();
      expect(squatter!.exitCode).toBeNull();
      expect(existsSync(`/proc/${pid1}`)).toBe(true);
    } finally {
      squatter?.kill();
    }
  });

  nsTest("a sandbox's /etc/passwd made a FIFO or huge holds nothing: the simulator reads it bounded and never blocks on it", async () => {
    // The simulator reads a sandbox's /etc/passwd and /etc/group (a command's user, a file entry's owner) on its own
    // event loop, which every sandbox of the node shares. Root inside made /etc/passwd a FIFO: the synchronous open
    // waited for a writer forever and the whole node stopped answering. A sparse file of gigabytes was read whole.
    const a = await newSandbox("tok-fifo-a");
    const b = await newSandbox("tok-fifo-b");
    await a.sb.commands.run("rm /etc/group && truncate -s 3G /etc/group && rm /etc/passwd && mkfifo /etc/passwd", { user: "root" });
    // Reading the FIFO must not block the node: a's own requests are refused at once, b's are served meanwhile.
    const refused = await a.sb.commands.run("id").then((r) => `ran: ${r.stdout}`, (e: Error) => e.message);
    expect(refused).toContain("/etc/passwd is not a regular file");
    expect(await out(b.sb, "echo b served")).toBe("b served");
    // Entries name owners by number when the sandbox's files are not readable names (a has no names now).
    expect((await a.sb.files.getInfo("/etc/hostname").catch((e: Error) => e)) instanceof Error).toBe(false);
  });

  nsTest("a process named like /proc/<pid>/stat fields cannot make release signal a host process group", async () => {
    // Release (and hibernate without a freezer) signals every process group under the commands it started, found by
    // reading each host /proc/<pid>/stat after the first ") ". A process may name itself (15 bytes, prctl): ") S <ppid>
    // <pgid>" made it a child of a command it ran (whose host pid the SDK reports) with any process group, and the
    // simulator, the host's root, SIGKILLed that group: a host process here (pgid 1 would have been every process).
    const { sb, claimId } = await newSandbox("tok-comm");
    const victim = spawn("sleep", ["60"], { detached: true, stdio: "ignore" });
    try {
      await new Promise((r) => victim.once("spawn", r));
      const leader = await sb.commands.run("sleep 600", { background: true, timeoutMs: 0 });
      const name = `) S ${leader.pid} ${victim.pid}`;
      expect(name.length).toBeLessThanOrEqual(15);
      const spoof = `import ctypes, time; ctypes.CDLL(None).prctl(15, b"${name}", 0, 0, 0); open("/tmp/named", "w").write("1"); time.sleep(600)`;
      await sb.files.write("/tmp/spoof.py", spoof);
      await sb.commands.run("python3 /tmp/spoof.py", { background: true, timeoutMs: 0 });
      await waitFor("the process named", async () => (await sb.files.exists("/tmp/named")) === true);
      await sim.node.guestHost!.get(claimId)!.destroy();
      expect(victim.exitCode).toBeNull();
      expect(victim.signalCode).toBeNull();
      expect(existsSync(`/proc/${victim.pid}`)).toBe(true);
    } finally {
      victim.kill("SIGKILL");
    }
  });

  nsTest("a deep listing is bounded: past LIST_MAX_ENTRIES it is refused naming the bound, not walked on the node's event loop", async () => {
    // files.list walks synchronously on the event loop every sandbox of the node shares; "/" at depth 64 was the whole
    // tree, the host's /usr, /etc and /lib below (150k entries here), seconds of a stalled node per request.
    const { sb } = await newSandbox("tok-list");
    const refused = await sb.files.list("/", { depth: 64 }).then((l) => `listed ${l.length}`, (e: Error) => e.message);
    expect(refused).toContain(`more than ${LIST_MAX_ENTRIES} entries`);
    // An ordinary listing is unchanged.
    await sb.files.write("/tmp/l/a/b.txt", "x");
    expect((await sb.files.list("/tmp/l", { depth: 3 })).map((e) => e.path)).toEqual(["/tmp/l/a", "/tmp/l/a/b.txt"]);
  });

  nsTest("root inside reads no host secret under /etc: a file only root may read is empty inside, the host's unchanged", async () => {
    // /etc is an overlay over the host's, and root inside (uid 0, CAP_DAC_OVERRIDE) read its root-only files: private
    // keys, an admin kubeconfig, VPN and Wi-Fi secrets. They are empty files of the sandbox's own now (layer.ts).
    const { sb } = await newSandbox("tok-etc");
    expect(await out(sb, `wc -c < /etc/${SECRET}; stat -c '%a %U' /etc/${SECRET}; wc -c < /etc/${SECRET}.d/wifi.conf`, { user: "root" })).toBe("0\n600 root\n0");
    expect(readFileSync(`/etc/${SECRET}`, "utf8")).toBe("host key material");
    // What is everyone's stays (the host's /etc/os-release), and sudo's root-only files are kept for sudo inside.
    expect(await out(sb, "cat /etc/os-release", { user: "root" })).toBe(readFileSync("/etc/os-release", "utf8").trim());
    if (existsSync("/etc/sudoers")) expect(await out(sb, "wc -c < /etc/sudoers", { user: "root" })).not.toBe("0");
  });

  nsTest("directory watches are bounded per sandbox: a recursive watch of a large tree and a 33rd watch are refused", async () => {
    // Each watch takes inotify watches of the host's root, shared by every root process of the machine (192k here): a
    // recursive watch of "/" took ~20k (the host's /usr below it), and a sandbox could hold any number of them.
    const { sb } = await newSandbox("tok-watch");
    const big = await sb.files.watchDir("/", () => {}, { recursive: true }).then(async (h) => (await h.stop(), "watching"), (e: Error) => e.message);
    expect(big).toContain(`more than ${MAX_RECURSIVE_WATCH_DIRS} directories`);
    await sb.files.makeDir("/tmp/w/a/b");
    const handles = [await sb.files.watchDir("/tmp/w", () => {}, { recursive: true })];
    for (let i = 1; i < MAX_WATCHES; i++) handles.push(await sb.files.watchDir("/tmp", () => {}));
    const over = await sb.files.watchDir("/tmp", () => {}).then(async (h) => (await h.stop(), "watching"), (e: Error) => e.message);
    expect(over).toContain(`already holds ${MAX_WATCHES} directory watches`);
    // A stopped watch gives its place back, and a watch still sees its events.
    await handles.pop()!.stop();
    const seen: string[] = [];
    const again = await sb.files.watchDir("/tmp/w", (e) => void seen.push(e.name), { recursive: true });
    await sb.files.write("/tmp/w/a/b/new.txt", "x");
    await waitFor("the recursive watch's event", () => seen.some((n) => n.endsWith("new.txt")));
    await again.stop();
    for (const h of handles) await h.stop();
  });

  nsTest("root on the egress lane cannot read the host's traffic: no packet socket on the network it shares with the host", async () => {
    // The egress lane shares the host's network namespace: with CAP_NET_RAW, root inside opened a packet socket on the
    // host's loopback and read what the host's processes send there (a root token on its way to this node, another
    // sandbox's envd token). The marker below stands for such a header.
    const e = await newSandbox("tok-egress-sniff", { template: "base", net: "egress" });
    const marker = `sniffed-${randomBytes(6).toString("hex")}`;
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
    const sniff = [
      "import socket, sys, time",
      "try:",
      "    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))",
      "    s.bind(('lo', 0))",
      "except OSError as e:",
      "    print('refused', e.errno); raise SystemExit(0)",
      "print('listening', flush=True)",
      "s.settimeout(1)",
      "end = time.time() + 20",
      "while time.time() < end:",
      "    try:",
      "        if sys.argv[1].encode() in s.recv(65536): print('captured'); raise SystemExit(0)",
      "    except socket.timeout:",
      "        pass",
      "print('nothing captured')",
    ].join("\n");
    await e.sb.files.write("/tmp/sniff.py", sniff);
    // The host keeps talking on its loopback while the sandbox listens.
    const talk = setInterval(() => void fetch(`http://127.0.0.1:${server.port}/`, { headers: { authorization: `Bearer ${marker}` } }).catch(() => {}), 100);
    try {
      expect(await out(e.sb, `python3 /tmp/sniff.py ${marker}`, { user: "root" })).toBe("refused 1");
      // Root's ordinary network work on the lane is unchanged: the host listener answers.
      expect(await out(e.sb, `python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:${server.port}/').read().decode())"`, { user: "root" })).toBe("ok");
    } finally {
      clearInterval(talk);
      await server.stop(true);
    }
  });

  nsTest("hibernate freezes every process (a counter stops), wake resumes it where it was, files kept", async () => {
    const { sb, claimId, dir } = await newSandbox("tok-freeze");
    await sb.commands.run("i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done", { background: true, timeoutMs: 0 });
    const countFile = join(dir, "layer", "tmp", "count"); // the layer on the host: reading it does not wake the sandbox
    const count = () => Number(readFileSync(countFile, "utf8"));
    await waitFor("the counter running", () => existsSync(countFile) && count() > 3);
    expect((await post(claimId, "hibernate")).status).toBe(204);
    const ns = sim.node.guestHost!.get(claimId)!.ns!;
    expect(ns.pauseMode).toStartWith("freezer-v"); // this host has a freezer cgroup (v1 here; v2 on unified hosts)
    await waitFor("frozen", () => ns.frozen());
    const frozenAt = count();
    await Bun.sleep(400); // a running counter would move ~8 times meanwhile
    expect(count()).toBe(frozenAt);
    expect((await post(claimId, "wake")).status).toBe(204);
    await waitFor("counting again", () => count() > frozenAt + 2);
    // The same process went on (its count continued); it did not restart from 1.
    expect(count()).toBeGreaterThan(frozenAt);
  });

  nsTest("without a freezer cgroup, hibernate stops the sandbox's processes with SIGSTOP and wake resumes them", async () => {
    const other = await startSandboxdSim({ rootToken: ROOT, pools: ["base/none/small=1"], guestAgents: { freezer: false } });
    try {
      const r = await fetch(`${other.url}/v1/claim`, { method: "POST", headers: auth, body: JSON.stringify({ template: "base" }) });
      const c = (await r.json()) as { id: string };
      const g = other.node.guestHost!.get(c.id)!;
      await g.ready;
      expect(g.ns!.pauseMode).toBe("sigstop");
      const before = new Set(g.ns!.pids());
      void g.processes.start({ cmd: "/bin/sh", args: ["-c", "while :; do date +%s%N > /tmp/t; sleep 0.05; done"], envs: {} }, { stdin: false, ...g.launch(undefined, undefined, {}) }, () => {});
      const loop = await waitFor("the loop inside", () => g.ns!.pids().find((p) => !before.has(p) && readFileSync(`/proc/${p}/cmdline`, "utf8").startsWith("/bin/sh\0-c\0while")));
      const state = () => readFileSync(`/proc/${loop}/stat`, "utf8").split(") ")[1]![0];
      expect((await fetch(`${other.url}/v1/sandboxes/${c.id}/hibernate`, { method: "POST", headers: auth })).status).toBe(204);
      await waitFor("stopped", () => state() === "T");
      expect((await fetch(`${other.url}/v1/sandboxes/${c.id}/wake`, { method: "POST", headers: auth })).status).toBe(204);
      await waitFor("resumed", () => state() !== "T");
    } finally {
      await other.stop();
    }
  }, 30_000); // a second simulator and its namespaced sandbox start under load

  nsTest("a fork child sees its parent's files (home, /tmp, /etc) and then diverges", async () => {
    const parent = await newSandbox("tok-fork-parent");
    await parent.sb.commands.run("echo parent > /tmp/t && echo parent > ~/h && useradd bob", { user: "root" });
    const fr = await post(parent.claimId, "fork", { count: 1 });
    expect(fr.status).toBe(200);
    const c = ((await fr.json()) as { children: { id: string; token: string }[] }).children[0]!;
    // A fork child holds its parent's access token until the e2b surface hands it its own.
    const child = await adopt(c, "tok-fork-parent");
    expect(await out(child.sb, "cat /tmp/t /root/h; id -u bob", { user: "root" })).toBe("parent\nparent\n1001");
    expect(await out(child.sb, "hostname; cat /etc/hostname")).toBe(`${c.id}\n${c.id}`);
    await child.sb.commands.run("echo child > /tmp/t", { user: "root" });
    await parent.sb.commands.run("echo parent2 > /tmp/t", { user: "root" });
    expect(await out(child.sb, "cat /tmp/t")).toBe("child");
    expect(await out(parent.sb, "cat /tmp/t")).toBe("parent2");
  });

  nsTest("a promoted template's clone starts from a copy of the source's layer and its envd defaults", async () => {
    const src = await newSandbox("tok-build");
    // What a template build leaves behind: files anywhere in the tree, a system change, /init's env and workdir.
    await src.sb.commands.run("mkdir -p /opt/app && echo built > /opt/app/out && useradd builder && echo home > ~/h", { user: "root" });
    const init = await fetch(`${front.url}/init`, {
      method: "POST",
      headers: { "e2b-sandbox-id": src.sb.sandboxId, "e2b-sandbox-port": String(ENVD), "x-access-token": "tok-build" },
      body: JSON.stringify({ envVars: { BUILD_MODE: "release" }, defaultWorkdir: "/opt/app" }),
    });
    expect(init.status).toBe(204);
    const pr = await post(src.claimId, "promote", { token: "", template: "built:v1" });
    expect(pr.status).toBe(200);
    // The clone holds the source's access token (a VM snapshot keeps envd's memory): nothing answers without it,
    // and a re-init must bring the new token's hash in instance metadata, as the e2b surface does for a clone.
    const r = await fetch(`${sim.url}/v1/claim`, { method: "POST", headers: auth, body: JSON.stringify({ template: "built:v1" }) });
    const claimed = (await r.json()) as { id: string; token: string };
    const publicId = claimed.id.replace("_", "-");
    routes.set(publicId, { claimId: claimed.id, claimToken: claimed.token });
    const envs = await fetch(`${front.url}/envs`, { headers: { "e2b-sandbox-id": publicId, "e2b-sandbox-port": String(ENVD) } });
    expect(envs.status).toBe(401);
    expect(await envs.text()).not.toContain("release");
    const meta = await fetch(`${sim.url}/v1/sandboxes/${claimed.id}/instance-metadata`, {
      method: "PUT",
      headers: auth,
      body: JSON.stringify({ accessTokenHash: createHash("sha512").update("tok-clone").digest("hex") }),
    });
    expect(meta.status).toBeLessThan(300);
    // The clone's /init sets only its token, so the template's defaults stand.
    const clone = await adopt(claimed, "tok-clone", {});
    expect(await out(clone.sb, "pwd; cat out; echo $BUILD_MODE; id -u builder; cat /root/h", { user: "root" })).toBe("/opt/app\nbuilt\nrelease\n1001\nhome");
    // A copy: the clone's writes stay in the clone.
    await clone.sb.commands.run("echo changed > /opt/app/out", { user: "root" });
    expect(await out(src.sb, "cat /opt/app/out")).toBe("built");
  });

  nsTest("release leaves no process, mount, cgroup or directory behind on the host", async () => {
    const { sb, claimId, dir } = await newSandbox("tok-release");
    await sb.commands.run("setsid sleep 300 & nohup sleep 301 >/dev/null 2>&1 & sleep 302", { background: true, timeoutMs: 0 });
    // A relayed port starts the sandbox's ports relay; it must go with the sandbox too.
    const relayed = await fetch(`${front.url}/`, { headers: { "e2b-sandbox-id": sb.sandboxId, "e2b-sandbox-port": "3000", "x-access-token": "tok-release" } });
    expect(relayed.status).toBe(502);
    expect(processesNaming(dir).length).toBeGreaterThan(0);
    await waitFor("the sleeps", () => (sim.node.guestHost!.get(claimId)!.ns!.pids().length >= 5 ? true : undefined));
    expect(mountsNaming(dir).length).toBeGreaterThan(0); // the sandbox's own mount namespace shows its overlay
    const pids = sim.node.guestHost!.get(claimId)!.ns!.pids();
    const cgroup = sim.node.guestHost!.get(claimId)!.ns!.cgroupDir;
    expect(cgroup && existsSync(cgroup)).toBe(true);
    expect((await post(claimId, "release")).status).toBe(204);
    await waitFor("every process gone", () => pids.every((p) => !existsSync(`/proc/${p}`) || readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1]![0] === "Z"));
    await waitFor("the directory removed", () => !existsSync(dir));
    expect(processesNaming(dir)).toEqual([]);
    expect(mountsNaming(dir)).toEqual([]);
    expect(existsSync(cgroup!)).toBe(false);
  });
});
