// Issue 27 (low): on a simulator running as root, a build step `RUN` as root left its chroot (chroot into a
// subdirectory, climb with "..", chroot again) and was root on the machine: any key holder with builds on could read
// the host's /etc/shadow and write anywhere. The simulator now bounds the capabilities of every command in a rootful
// sandbox (services/sandboxd-sim/guest/namespace.ts ROOT_CAPABILITIES: no SYS_CHROOT, SYS_ADMIN, MKNOD, …) and keeps
// the host kernel's /proc knobs read-only, so the same step fails inside and the host is untouched, while an ordinary
// root step (a package's files under /usr, a user) still builds. sandbox-e2b from its real flags, the simulator with
// its envd-compatible guests. The namespaced sandboxes need root: without it the guests are rootless (one uid, not
// root on the host) or plain processes, and this file skips, saying so.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { type BuildStack, allLogs, api, requestBuild, startBuildStack, waitBuild } from "./support.ts";

const AS_ROOT = process.getuid?.() === 0;
const rootTest = AS_ROOT ? test : test.skip;

let s: BuildStack | undefined;
beforeAll(async () => {
  if (AS_ROOT) s = await startBuildStack({ store: false });
}, 60_000);
afterAll(() => s?.stop());

rootTest("a RUN as root that escapes its chroot (to write the host's /tmp and read its /etc/shadow) fails the build; the host is untouched", async () => {
  expect(s!.cluster.nodes[0]!.node.guestHost!.isolation).toEqual({ mode: "namespaces" });
  const marker = `/tmp/build-escape-${randomBytes(6).toString("hex")}`;
  const escape =
    `mkdir -p /tmp/jail && cd / && python3 -c 'import os; os.chroot("/tmp/jail"); [os.chdir("..") for _ in range(64)]; ` +
    `os.chroot("."); open("${marker}", "w").write(open("/etc/shadow").read())'`;
  try {
    const b = await requestBuild(s!, "escape");
    const start = await api(s!, "POST", `/v2/templates/escape/builds/${b.buildID}`, {
      fromImage: "base",
      steps: [
        { type: "USER", args: ["root"] },
        { type: "RUN", args: ["id -u"] },
        { type: "RUN", args: [escape] },
      ],
    });
    expect(start.status).toBe(202);
    const done = await waitBuild(s!, b);
    expect(done.status).toBe("error");
    const logs = (await allLogs(s!, b)).map((l) => l.message).join("\n");
    expect(logs).toMatch(/^0$/m); // the step ran as root inside
    expect(logs).toContain("PermissionError: [Errno 1] Operation not permitted");
    expect(logs).toContain("command failed with exit code 1");
    expect(existsSync(marker)).toBe(false);
  } finally {
    rmSync(marker, { force: true });
  }
}, 120_000);

rootTest("a RUN as root can neither mount the host's root nor make a disk's device node; root's ordinary work still builds", async () => {
  const refused = await requestBuild(s!, "mounter");
  expect((await api(s!, "POST", `/v2/templates/mounter/builds/${refused.buildID}`, { fromImage: "base", steps: [{ type: "USER", args: ["root"] }, { type: "RUN", args: ["mkdir -p /tmp/host && mount --bind / /tmp/host"] }] })).status).toBe(202);
  expect((await waitBuild(s!, refused)).status).toBe("error");
  expect((await allLogs(s!, refused)).map((l) => l.message).join("\n")).toContain("permission denied");
  const mknod = await requestBuild(s!, "mknod");
  expect((await api(s!, "POST", `/v2/templates/mknod/builds/${mknod.buildID}`, { fromImage: "base", steps: [{ type: "USER", args: ["root"] }, { type: "RUN", args: ["mknod /tmp/sda b 8 0"] }] })).status).toBe(202);
  expect((await waitBuild(s!, mknod)).status).toBe("error");
  expect((await allLogs(s!, mknod)).map((l) => l.message).join("\n")).toContain("Operation not permitted");

  // What a Dockerfile's root steps do: files under /usr (copied up into the sandbox's layer), a user, chown.
  const ok = await requestBuild(s!, "ordinary");
  const hostUsr = readFileSync("/etc/passwd", "utf8");
  expect(
    (await api(s!, "POST", `/v2/templates/ordinary/builds/${ok.buildID}`, {
      fromImage: "base",
      steps: [
        { type: "USER", args: ["root"] },
        { type: "RUN", args: ["mkdir -p /usr/local/share/tool && echo v1 > /usr/local/share/tool/version && useradd -m builder && chown builder /usr/local/share/tool/version"] },
      ],
    })).status,
  ).toBe(202);
  const built = await waitBuild(s!, ok);
  expect([built.status, built.reason]).toEqual(["ready", undefined]);
  expect(existsSync("/usr/local/share/tool/version")).toBe(false);
  expect(readFileSync("/etc/passwd", "utf8")).toBe(hostUsr);
}, 120_000);
