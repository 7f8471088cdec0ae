// The guest agent, driven by the stock e2b SDK (2.51.0) through the simulated node's ports relay: every envd call
// the SDK makes for commands and files goes client -> relay front -> node `GET …/ports/49983` (Upgrade: tcp) ->
// the sandbox's guest agent. The access token is set by envd `/init` over a passive (root-token) relay, as the
// e2b surface does after a create.
import { waitFor } from "#tests/support/wait.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import net from "node:net";
import { AuthenticationError, CommandExitError, FileType, Sandbox, TimeoutError } from "e2b";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { startRelayFront, type FrontRoute, type RelayFront } from "./relay-front.ts";

const ROOT = "guest-root-token";
const ENVD = 49983;

let sim: SandboxdSim;
let front: RelayFront;
const routes = new Map<string, FrontRoute>();
// The process sandbox (the fallback where namespaces are unavailable), for the tests of its own signal semantics.
let procSim: SandboxdSim;
let procFront: RelayFront;

/** POST /v1/claim, then envd /init over the passive relay with the given access token (and init body extras). */
async function newSandbox(accessToken: string, init: Record<string, unknown> = {}, on: { sim: SandboxdSim; front: RelayFront } = { sim, front }): Promise<{ sb: Sandbox; claimId: string; claimToken: string }> {
  const { sim, front } = on;
  const r = await fetch(`${sim.url}/v1/claim`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ template: "base" }) });
  const claim = (await r.json()) as { id: string; token: string };
  const publicId = claim.id.replace("_", "-");
  routes.set(publicId, { claimId: claim.id, claimToken: claim.token });
  const initReply = await fetch(`${front.url}/init`, {
    method: "POST",
    headers: { "e2b-sandbox-id": publicId, "e2b-sandbox-port": String(ENVD) },
    body: JSON.stringify({ accessToken, defaultUser: "user", defaultWorkdir: "/home/user", ...init }),
  });
  expect(initReply.status).toBe(204);
  return { sb: sdkFor(publicId, accessToken, front.url), claimId: claim.id, claimToken: claim.token };
}

/** The SDK's own Sandbox object for an existing sandbox (what Sandbox.create returns after its REST call). */
function sdkFor(publicId: string, accessToken: string, sandboxUrl = front.url): Sandbox {
  const Ctor = Sandbox as unknown as new (o: Record<string, unknown>) => Sandbox;
  return new Ctor({ sandboxId: publicId, envdAccessToken: accessToken, envdVersion: "0.8.0", sandboxUrl, domain: "sim.test", apiKey: "unused" });
}


function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** Linux process state letter from /proc (R, S, T = stopped, …), or undefined when the process is gone. */
function procState(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0];
  } catch {
    return undefined;
  }
}

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["base/none/small=2"], guestAgents: true });
  front = await startRelayFront(sim.url, ROOT, (id) => routes.get(id));
  procSim = await startSandboxdSim({ rootToken: ROOT, pools: ["base/none/small=1"], guestAgents: { isolation: "process" } });
  procFront = await startRelayFront(procSim.url, ROOT, (id) => routes.get(id));
});
afterAll(async () => {
  await Promise.all([front.stop(), procFront.stop()]);
  await Promise.all([sim.stop(), procSim.stop()]);
});

describe("commands", () => {
  test("run: stdout, stderr and exit code 0; a failing command throws CommandExitError with its code", async () => {
    const { sb } = await newSandbox("tok-run");
    const r = await sb.commands.run("echo hello; echo oops >&2");
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe("hello\n");
    expect(r.stderr).toBe("oops\n");
    const err = await sb.commands.run("echo partial; exit 7").catch((e) => e);
    expect(err).toBeInstanceOf(CommandExitError);
    expect((err as CommandExitError).exitCode).toBe(7);
    expect((err as CommandExitError).stdout).toBe("partial\n");
  });

  test("run: streaming callbacks see each line as it is written; envs and cwd apply", async () => {
    const { sb } = await newSandbox("tok-stream");
    const out: string[] = [];
    const errs: string[] = [];
    await sb.files.makeDir("work");
    const r = await sb.commands.run('for i in 1 2 3; do echo "$GREETING$i"; echo e$i >&2; sleep 0.05; done; basename "$PWD"', {
      envs: { GREETING: "hi" },
      cwd: "/home/user/work",
      onStdout: (d) => void out.push(d),
      onStderr: (d) => void errs.push(d),
    });
    expect(out.join("")).toBe("hi1\nhi2\nhi3\nwork\n");
    expect(out.length).toBeGreaterThanOrEqual(3); // delivered as they came, not as one block at the end
    expect(errs.join("")).toBe("e1\ne2\ne3\n");
    expect(r.stdout).toBe("hi1\nhi2\nhi3\nwork\n");
  });

  test("background command: listed, killed (kill -> true), gone from the list; unknown pid -> false", async () => {
    const { sb } = await newSandbox("tok-bg");
    const h = await sb.commands.run("sleep 60", { background: true });
    expect((await sb.commands.list()).map((p) => p.pid)).toContain(h.pid);
    expect(await h.kill()).toBe(true);
    const end = await h.wait().catch((e) => e);
    expect(end).toBeInstanceOf(CommandExitError);
    expect((end as CommandExitError).exitCode).toBe(-1);
    await waitFor("process to leave the list", async () => ((await sb.commands.list()).some((p) => p.pid === h.pid) ? undefined : true));
    expect(await sb.commands.kill(h.pid)).toBe(false);
  });

  test("command timeout: TimeoutError, and the command is ended, not left running", async () => {
    const { sb } = await newSandbox("tok-timeout");
    const started = Date.now();
    const err = await sb.commands.run("sleep 30", { timeoutMs: 700 }).catch((e) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(Date.now() - started).toBeLessThan(10_000);
    await waitFor("timed-out command to end", async () => ((await sb.commands.list()).length === 0 ? true : undefined));
  });

  test("stdin: sendStdin then closeStdin reaches the command", async () => {
    const { sb } = await newSandbox("tok-stdin");
    const h = await sb.commands.run("tr a-z A-Z", { background: true, stdin: true });
    await sb.commands.sendStdin(h.pid, "shout ");
    await sb.commands.sendStdin(h.pid, "this\n");
    await sb.commands.closeStdin(h.pid);
    const r = await h.wait();
    expect(r.stdout).toBe("SHOUT THIS\n");
  });

  test("/init's env vars and default working directory apply to commands", async () => {
    const { sb } = await newSandbox("tok-init", { envVars: { FROM_INIT: "yes" }, defaultWorkdir: "/home/user/project" });
    const r = await sb.commands.run('echo "$FROM_INIT $(basename "$PWD")"');
    expect(r.stdout).toBe("yes project\n");
    // The request's envs win over init's.
    expect((await sb.commands.run('echo "$FROM_INIT"', { envs: { FROM_INIT: "overridden" } })).stdout).toBe("overridden\n");
  });

  test("connect to a running command: its later output reaches the new handle", async () => {
    const { sb } = await newSandbox("tok-connect");
    const h = await sb.commands.run("sleep 0.5; echo late", { background: true });
    await h.disconnect();
    const again = await sb.commands.connect(h.pid);
    const r = await again.wait();
    expect(r.stdout).toBe("late\n");
  });
});

describe("pty", () => {
  test("pty.create: a terminal of the asked size; typed input runs, its output comes back; resize changes the size", async () => {
    const { sb } = await newSandbox("tok-pty");
    let out = "";
    const h = await sb.pty.create({ cols: 100, rows: 30, onData: (d) => void (out += new TextDecoder().decode(d)), timeoutMs: 20_000 });
    await sb.pty.sendInput(h.pid, new TextEncoder().encode("stty size\n"));
    await waitFor("the first size", () => (out.includes("30 100") ? true : undefined));
    await sb.pty.resize(h.pid, { cols: 120, rows: 40 });
    await sb.pty.sendInput(h.pid, new TextEncoder().encode("stty size; tty; exit 0\n"));
    const r = await h.wait();
    expect(r.exitCode).toBe(0);
    expect(out).toContain("40 120");
    expect(out).toMatch(/\/dev\/pts\/\d+/);
  });
});

describe("files", () => {
  test("write, read, list, exists, rename, makeDir, remove", async () => {
    const { sb } = await newSandbox("tok-files");
    const info = await sb.files.write("notes/a.txt", "first");
    expect(info.path).toBe("/home/user/notes/a.txt");
    expect(await sb.files.read("/home/user/notes/a.txt")).toBe("first");
    expect(await sb.files.exists("notes/a.txt")).toBe(true);
    expect(await sb.files.exists("notes/missing.txt")).toBe(false);
    expect(await sb.files.makeDir("notes/sub")).toBe(true);
    expect(await sb.files.makeDir("notes/sub")).toBe(false); // already there
    const moved = await sb.files.rename("notes/a.txt", "notes/sub/b.txt");
    expect(moved.path).toBe("/home/user/notes/sub/b.txt");
    expect(await sb.files.exists("notes/a.txt")).toBe(false);
    const list = await sb.files.list("notes", { depth: 2 });
    expect(list.map((e) => [e.path, e.type])).toEqual([
      ["/home/user/notes/sub", FileType.DIR],
      ["/home/user/notes/sub/b.txt", FileType.FILE],
    ]);
    // Owner and group are names, the same a command reports.
    expect(list[0]!.owner).toBe((await sb.commands.run("id -un")).stdout.trim());
    expect(list[0]!.group).toBe((await sb.commands.run("id -gn")).stdout.trim());
    // Commands and files see one tree.
    expect((await sb.commands.run("cat notes/sub/b.txt")).stdout).toBe("first");
    await sb.files.remove("notes/sub");
    expect(await sb.files.exists("notes/sub/b.txt")).toBe(false);
    expect(await sb.files.read("notes/sub/b.txt").catch((e) => e.constructor.name)).toBe("FileNotFoundError");
  });

  test("file metadata: set by an upload (keys lowercased), reported by stat and list, kept by rename, replaced by the next upload", async () => {
    const { sb } = await newSandbox("tok-meta");
    const written = await sb.files.write("tagged.txt", "x", { metadata: { Owner: "alice", "build-id": "42" } });
    expect(written.metadata).toEqual({ owner: "alice", "build-id": "42" });
    expect((await sb.files.getInfo("tagged.txt")).metadata).toEqual({ owner: "alice", "build-id": "42" });
    await sb.files.rename("tagged.txt", "moved.txt");
    expect((await sb.files.list(".")).find((e) => e.name === "moved.txt")?.metadata).toEqual({ owner: "alice", "build-id": "42" });
    await sb.files.write("moved.txt", "y");
    expect((await sb.files.getInfo("moved.txt")).metadata).toBeUndefined();
    // Over the 4096-byte budget (the xattr prefix counted per key): 400 naming the limit.
    const headers: Record<string, string> = { "e2b-sandbox-id": sb.sandboxId, "e2b-sandbox-port": String(ENVD), "x-access-token": "tok-meta", "content-type": "application/octet-stream" };
    for (let i = 0; i < 20; i++) headers[`x-metadata-k${i}`] = "v".repeat(250);
    const big = await fetch(`${front.url}/files?path=big-meta.txt`, { method: "POST", headers, body: "z" });
    expect(big.status).toBe(400);
    expect(((await big.json()) as { message: string }).message).toContain("more than 4096");
  });

  test("several files in one write (multipart, each part named by its path); recursive watch sees nested files", async () => {
    const { sb } = await newSandbox("tok-multi");
    const infos = await sb.files.write([
      { path: "multi/a.txt", data: "A" },
      { path: "multi/deep/b.txt", data: "B" },
    ]);
    expect(infos.map((i) => i.path).sort()).toEqual(["/home/user/multi/a.txt", "/home/user/multi/deep/b.txt"]);
    expect(await sb.files.read("multi/deep/b.txt")).toBe("B");
    const seen: string[] = [];
    const w = await sb.files.watchDir("multi", (e) => void seen.push(`${e.type}:${e.name}`), { recursive: true });
    await sb.commands.run("echo c > multi/deep/c.txt");
    await waitFor("a nested create event", () => seen.find((x) => x.startsWith("create:") && x.endsWith("c.txt")));
    await w.stop();
  });

  test("gzip and streamed uploads (octet-stream) land decoded", async () => {
    const { sb } = await newSandbox("tok-gzip");
    await sb.files.write("zipped.txt", "compressed on the wire", { gzip: true });
    expect(await sb.files.read("zipped.txt")).toBe("compressed on the wire");
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode("part one, "));
        c.enqueue(new TextEncoder().encode("part two"));
        c.close();
      },
    });
    await sb.files.write("streamed.txt", stream);
    expect((await sb.commands.run("cat streamed.txt")).stdout).toBe("part one, part two");
  });

  test("a 50 MB file both ways, byte for byte", async () => {
    const { sb } = await newSandbox("tok-big");
    const big = new Uint8Array(50 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4096) big[i] = (i / 4096) % 251;
    await sb.files.write("big.bin", big.buffer);
    const sum = await sb.commands.run("sha256sum big.bin | cut -d' ' -f1");
    expect(sum.stdout.trim()).toBe(new Bun.CryptoHasher("sha256").update(big).digest("hex"));
    // The other way: a file made inside the sandbox, downloaded.
    await sb.commands.run("head -c 52428800 /dev/urandom > made.bin");
    const back = await sb.files.read("made.bin", { format: "bytes" });
    expect(back.length).toBe(50 * 1024 * 1024);
    const inside = (await sb.commands.run("sha256sum made.bin | cut -d' ' -f1")).stdout.trim();
    expect(new Bun.CryptoHasher("sha256").update(back).digest("hex")).toBe(inside);
  }, 60_000);

  test("watchDir: a file created and written inside the watched directory is reported", async () => {
    const { sb } = await newSandbox("tok-watch");
    await sb.files.makeDir("watched");
    const events: { name: string; type: string }[] = [];
    const w = await sb.files.watchDir("watched", (e) => void events.push({ name: e.name, type: e.type }));
    await sb.commands.run("echo data > watched/new.txt");
    await waitFor("watch events", () => (events.some((e) => e.name === "new.txt" && e.type === "create") ? true : undefined));
    await sb.files.remove("watched/new.txt");
    await waitFor("remove event", () => (events.some((e) => e.name === "new.txt" && e.type === "remove") ? true : undefined));
    await w.stop();
  });

  test("signed download and upload URLs work without X-Access-Token; a tampered or expired signature is refused", async () => {
    const { sb } = await newSandbox("tok-signed");
    await sb.files.write("shared.txt", "via signed url");
    const down = await sb.downloadUrl("shared.txt");
    const headers = { "e2b-sandbox-id": sb.sandboxId, "e2b-sandbox-port": String(ENVD) };
    const got = await fetch(down, { headers });
    expect(got.status).toBe(200);
    expect(await got.text()).toBe("via signed url");
    const tampered = down.replace(/signature=v1_./, "signature=v1_X");
    expect((await fetch(tampered, { headers })).status).toBe(401);
    // A valid signature past its expiration is refused too.
    const path = "shared.txt";
    const exp = Math.floor(Date.now() / 1000) - 10;
    const raw = `${path}:read::tok-signed:${exp}`;
    const sig = "v1_" + new Bun.CryptoHasher("sha256").update(raw).digest("base64").replace(/=+$/, "");
    const expired = await fetch(`${front.url}/files?path=${path}&signature=${encodeURIComponent(sig)}&signature_expiration=${exp}`, { headers });
    expect(expired.status).toBe(401);
    expect(((await expired.json()) as { message: string }).message).toBe("signature expired");
    const up = await sb.uploadUrl("uploaded.txt", { useSignatureExpiration: 60 });
    const form = new FormData();
    form.append("file", new Blob(["posted"]), "uploaded.txt");
    expect((await fetch(up, { method: "POST", body: form, headers })).status).toBe(200);
    expect(await sb.files.read("uploaded.txt")).toBe("posted");
  });
});

describe("access", () => {
  test("a wrong access token is refused for commands and files (AuthenticationError)", async () => {
    const { sb } = await newSandbox("tok-right");
    const wrong = sdkFor(sb.sandboxId, "tok-wrong");
    expect(await wrong.commands.run("echo hi").catch((e) => e)).toBeInstanceOf(AuthenticationError);
    expect(await wrong.files.read("x").catch((e) => e)).toBeInstanceOf(AuthenticationError);
    // The right token still works, and /health needs none.
    expect((await sb.commands.run("echo ok")).stdout).toBe("ok\n");
  });

  test("a server started inside the sandbox is reached through the relay on its port", async () => {
    const { sb } = await newSandbox("tok-port");
    const port = await freePort();
    await sb.files.write("site/index.html", "served from the sandbox");
    await sb.commands.run(`cd site && exec python3 -m http.server ${port} --bind 127.0.0.1`, { background: true, timeoutMs: 0 });
    const headers = { "e2b-sandbox-id": sb.sandboxId, "e2b-sandbox-port": String(port), "x-access-token": "tok-port" };
    const body = await waitFor("the in-sandbox server", async () => {
      const r = await fetch(`${front.url}/index.html`, { headers }).catch(() => undefined);
      return r?.status === 200 ? r.text() : undefined;
    }, 10_000);
    expect(body).toBe("served from the sandbox");
  });
});

describe("lifecycle of the process sandbox (the fallback without namespaces)", () => {
  test("hibernate stops every process (SIGSTOP), wake resumes them, release kills them and removes the directory", async () => {
    const sim = procSim;
    const { sb, claimId } = await newSandbox("tok-life", {}, { sim: procSim, front: procFront });
    const h = await sb.commands.run("sleep 120", { background: true, timeoutMs: 0 });
    const root = sim.node.guestHost!.get(claimId)!.paths.root;
    expect(existsSync(root)).toBe(true);
    const runningOrSleeping = () => ["R", "S"].includes(procState(h.pid) ?? "") || undefined;
    expect(runningOrSleeping()).toBe(true);
    const post = (verb: string) => fetch(`${sim.url}/v1/sandboxes/${claimId}/${verb}`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` } });
    expect((await post("hibernate")).status).toBe(204);
    await waitFor("stopped", () => (procState(h.pid) === "T" ? true : undefined));
    expect((await post("wake")).status).toBe(204);
    await waitFor("resumed", runningOrSleeping);
    expect((await post("release")).status).toBe(204);
    await waitFor("killed", () => (procState(h.pid) === undefined || procState(h.pid) === "Z" ? true : undefined));
    expect(existsSync(root)).toBe(false);
  });

  test("a command in a session of its own (setsid, or the shell under a pty) is stopped, resumed and killed too", async () => {
    const sim = procSim;
    const { sb, claimId } = await newSandbox("tok-session", {}, { sim: procSim, front: procFront });
    const h = await sb.commands.run("setsid sleep 300 & echo $!; wait", { background: true, timeoutMs: 0 });
    const pid = Number(await waitFor("the setsid child's pid", () => h.stdout.trim() || undefined));
    const post = (verb: string) => fetch(`${sim.url}/v1/sandboxes/${claimId}/${verb}`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` } });
    expect((await post("hibernate")).status).toBe(204);
    await waitFor("stopped", () => (procState(pid) === "T" ? true : undefined));
    expect((await post("wake")).status).toBe(204);
    await waitFor("resumed", () => (procState(pid) !== "T" ? true : undefined));
    expect((await post("release")).status).toBe(204);
    await waitFor("killed", () => (procState(pid) === undefined || procState(pid) === "Z" ? true : undefined));
  });
});

describe("lifecycle", () => {
  test("expiry (reap) ends the sandbox's processes and removes its directory", async () => {
    const { sb, claimId } = await newSandbox("tok-exp");
    const h = await sb.commands.run("sleep 120", { background: true, timeoutMs: 0 });
    const root = sim.node.guestHost!.get(claimId)!.paths.root;
    sim.expire(claimId);
    sim.reapNow();
    await waitFor("killed", () => (procState(h.pid) === undefined || procState(h.pid) === "Z" ? true : undefined));
    // A namespaced sandbox removes its directory once its PID 1 has ended, after the processes die: wait for it.
    await waitFor("its directory removed", () => (existsSync(root) ? undefined : true));
  });

  test("a checkpoint keeps the files of that moment; a claim from it starts with them", async () => {
    const { sb, claimId } = await newSandbox("tok-ck");
    await sb.files.write("state.txt", "at checkpoint");
    const auth = { authorization: `Bearer ${ROOT}` };
    const ck = await fetch(`${sim.url}/v1/sandboxes/${claimId}/checkpoint`, { method: "POST", headers: auth, body: JSON.stringify({ name: "t/ck" }) });
    const ckId = ((await ck.json()) as { checkpoint: { id: string } }).checkpoint.id;
    await sb.files.write("state.txt", "after checkpoint");
    const cl = await fetch(`${sim.url}/v1/checkpoints/${ckId}/claim`, { method: "POST", headers: auth, body: "{}" });
    const branch = (await cl.json()) as { id: string; token: string };
    const publicId = branch.id.replace("_", "-");
    routes.set(publicId, { claimId: branch.id, claimToken: branch.token });
    const init = await fetch(`${front.url}/init`, { method: "POST", headers: { "e2b-sandbox-id": publicId, "e2b-sandbox-port": String(ENVD) }, body: JSON.stringify({ accessToken: "tok-branch" }) });
    expect(init.status).toBe(204);
    expect(await sdkFor(publicId, "tok-branch").files.read("state.txt")).toBe("at checkpoint");
    expect(await sb.files.read("state.txt")).toBe("after checkpoint");
  });

  test("a fork child starts with the parent's files and takes its own token through /init + accessTokenHash", async () => {
    const { sb, claimId } = await newSandbox("tok-parent");
    await sb.files.write("inherited.txt", "from parent");
    const fr = await fetch(`${sim.url}/v1/sandboxes/${claimId}/fork`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ count: 1 }) });
    const child = ((await fr.json()) as { children: { id: string; token: string }[] }).children[0]!;
    const childPublic = child.id.replace("_", "-");
    routes.set(childPublic, { claimId: child.id, claimToken: child.token });
    const headers = { "e2b-sandbox-id": childPublic, "e2b-sandbox-port": String(ENVD) };
    // Without the hash, a new token is refused (the clone still holds the parent's).
    const refused = await fetch(`${front.url}/init`, { method: "POST", headers, body: JSON.stringify({ accessToken: "tok-child" }) });
    expect(refused.status).toBe(401);
    const hash = new Bun.CryptoHasher("sha512").update("tok-child").digest("hex");
    const meta = await fetch(`${sim.url}/v1/sandboxes/${child.id}/instance-metadata`, { method: "PUT", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ accessTokenHash: hash }) });
    expect(meta.status).toBe(204);
    const ok = await fetch(`${front.url}/init`, { method: "POST", headers, body: JSON.stringify({ accessToken: "tok-child" }) });
    expect(ok.status).toBe(204);
    const csb = sdkFor(childPublic, "tok-child");
    expect(await csb.files.read("inherited.txt")).toBe("from parent");
    await csb.files.write("inherited.txt", "changed in child");
    expect(await sb.files.read("inherited.txt")).toBe("from parent");
  });
});
