// The simulator's namespaced guest seen the way a user sees it: the stock e2b SDK (2.51.0) creates sandboxes through
// sandbox-e2b and reaches them through the in-process envd proxy. Each sandbox behaves as a small machine of its
// own (services/sandboxd-sim/guest/README.md): /home/user, its own /tmp, `user` by default and `root` on request,
// its own loopback on the `none` lane (two sandboxes on port 3000, each getHost(3000) its own server).
// The sandboxd-sim-level details (release leaves nothing behind, freezer, layers) are in
// tests/integration/sandboxd-sim/guest/namespaced.test.ts. Python check: the same scenarios with the stock Python
// SDK go here once tests/support/python/ (another change's venv harness) lands.
import { waitFor } from "#tests/support/wait.ts";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { Sandbox } from "e2b";
import { sdkOpts, startStack, type Stack } from "./harness.ts";

// Without root the simulator falls back to process sandboxes, which have none of this (isolation.ts).
const nsTest = process.getuid?.() === 0 ? test : test.skip;

let s: Stack;
beforeAll(async () => {
  s = await startStack({ proxy: true, guestAgents: true, pools: ["img:1/none/small=2", "img:1/egress/small=1"] });
});
afterAll(() => s.stop());

nsTest("as root the simulator's guests are namespaced, not the process-sandbox fallback", () => {
  for (const n of s.cluster.nodes) expect(n.node.guestHost!.isolation).toEqual({ mode: "namespaces" });
});

nsTest("pwd is /home/user, cwd /tmp works, id -u is 1000 by default and 0 with user root", async () => {
  const sbx = await Sandbox.create("base", sdkOpts(s));
  expect((await sbx.commands.run("pwd")).stdout).toBe("/home/user\n");
  expect((await sbx.commands.run("pwd", { cwd: "/tmp" })).stdout).toBe("/tmp\n");
  expect((await sbx.commands.run("id -u; id -un")).stdout).toBe("1000\nuser\n");
  expect((await sbx.commands.run("id -u", { user: "root" })).stdout).toBe("0\n");
  await sbx.kill();
});

nsTest("a file written to /tmp in one sandbox is absent in another and on the host", async () => {
  const a = await Sandbox.create("base", sdkOpts(s));
  const b = await Sandbox.create("base", sdkOpts(s));
  const name = `/tmp/e2b-guest-${randomBytes(6).toString("hex")}`;
  await a.commands.run(`echo mine > ${name}`);
  expect(await a.files.read(name)).toBe("mine\n");
  expect(await b.files.exists(name)).toBe(false);
  expect((await b.commands.run(`test -e ${name} && echo present || echo absent`)).stdout).toBe("absent\n");
  expect(existsSync(name)).toBe(false);
  await Promise.all([a.kill(), b.kill()]);
});

nsTest("two sandboxes serve port 3000 at once and each getHost(3000) reaches its own", async () => {
  const boxes = [await Sandbox.create("base", sdkOpts(s)), await Sandbox.create("base", sdkOpts(s))];
  for (const [i, sbx] of boxes.entries()) {
    await sbx.files.write("site/index.html", `sandbox ${i}`);
    await sbx.commands.run("cd site && exec python3 -m http.server 3000 --bind 127.0.0.1", { background: true, timeoutMs: 0 });
  }
  for (const [i, sbx] of boxes.entries()) {
    expect(sbx.getHost(3000)).toStartWith(`3000-${sbx.sandboxId}.`);
    const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
    // getHost's `{port}-{id}.{domain}`, spelled as the proxy's header routing (E2B_SANDBOX_URL mode).
    const headers = { "e2b-sandbox-id": sbx.sandboxId, "e2b-sandbox-port": "3000", "x-access-token": token };
    const body = await waitFor(`port 3000 of sandbox ${i}`, async () => {
      const r = await fetch(`${s.proxyUrl}/index.html`, { headers }).catch(() => undefined);
      return r?.status === 200 ? r.text() : undefined;
    }, 15_000);
    expect(body).toBe(`sandbox ${i}`);
  }
  await Promise.all(boxes.map((b) => b.kill()));
});

nsTest("useradd inside, then a file chowned to the new user; the host has no such user", async () => {
  const sbx = await Sandbox.create("base", sdkOpts(s));
  const r = await sbx.commands.run("useradd carol && touch /tmp/c && chown carol /tmp/c && stat -c %U /tmp/c", { user: "root" });
  expect(r.stdout).toBe("carol\n");
  expect((await Bun.file("/etc/passwd").text()).includes("carol:")).toBe(false);
  await sbx.kill();
});

nsTest("pause and connect keep the files and a running process's state", async () => {
  const sbx = await Sandbox.create("base", sdkOpts(s));
  await sbx.files.write("kept.txt", "kept");
  await sbx.commands.run("i=0; while :; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.05; done", { background: true, timeoutMs: 0 });
  await waitFor("the counter", async () => Number(await sbx.files.read("/tmp/n").catch(() => "0")) > 2);
  await sbx.pause();
  const back = await Sandbox.connect(sbx.sandboxId, sdkOpts(s));
  const before = Number(await back.files.read("/tmp/n"));
  expect(await back.files.read("kept.txt")).toBe("kept");
  // The same counter goes on from where it stood (it did not start over at 1).
  await waitFor("counting on", async () => Number(await back.files.read("/tmp/n")) > before + 2);
  await back.kill();
});
