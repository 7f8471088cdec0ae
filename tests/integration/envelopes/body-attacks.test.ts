// A guest whose body breaks framing after the relay sent the response head (issue 17 "Framing"): the relay must end
// the client's response as a failed download (never a successful, truncated one) and print nothing raw: Bun wrote a
// stack trace of the errored body stream to stderr, outside pino, whatever `error` handler was set. sandbox-e2b runs
// as a real process (REST surface, in-process proxy, metrics listener) over one simulated node; a raw guest answers
// each attack path with a good head and the start of a body at once, and the violation a moment later (so the
// client has the head and is reading the body when it breaks), or all in one write.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { deriveAccessToken } from "#shared/e2b/index.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { until } from "#tests/support/wait.ts";
import { spawnE2b, type Child } from "../e2b/process.ts";

const ROOT = "root-body-attacks";
const SECRET = "secret-body-attacks";
const DOMAIN = "body.test";
let sim: SandboxdSim;
let guest: net.Server;
let dir: string;
let child: Child;
let proxyPort: number;
let metricsPort: number;
let publicId: string;
let host: string;
let token: string;

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=1"] });
  guest = await startAttackGuest();
  const claimed = await new SandboxdClient({ baseUrl: sim.url, token: ROOT }).claim({ template: "img", claim_ref: "team/x" });
  sim.attachGuest(claimed.id, 3000, (guest.address() as net.AddressInfo).port);
  publicId = claimed.id.replace("sb_", "sb-");
  host = `3000-${publicId}.${DOMAIN}`;
  token = deriveAccessToken(SECRET, claimed.token);
  dir = mkdtempSync(join(tmpdir(), "body-attacks-"));
  writeFileSync(join(dir, "secret"), `${SECRET}\n`);
  child = spawnE2b([
    `--sandboxd-seeds=${sim.addr}`,
    `--sandboxd-token=${ROOT}`,
    "--inventory-poll=200ms",
    "--e2b-bind-address=127.0.0.1:0",
    `--e2b-domain=${DOMAIN}`,
    `--e2b-envd-secret-file=${join(dir, "secret")}`,
    "--e2b-allow-anonymous",
    "--envd-proxy-bind-address=127.0.0.1:0",
    "--metrics-bind-address=127.0.0.1:0",
  ]);
  proxyPort = Number((await child.waitFor("envd proxy listening")).port);
  metricsPort = Number((await child.waitFor("metrics listening")).port);
}, 60_000);
afterAll(async () => {
  await child?.stop();
  guest?.close();
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const CHUNKED_HEAD = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
const SIZED_HEAD = "HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n";
/** Each attack: what the guest sends at once, then after 150 ms (`null`: it closes instead). */
const REPLIES: Record<string, [string, string | null]> = {
  "/negative-chunk": [`${CHUNKED_HEAD}1\r\nZ\r\n`, "-6\r\nQ"],
  "/bad-chunk-crlf": [`${CHUNKED_HEAD}4\r\nabcd\r\n`, "4\r\nabcdXY"],
  "/unterminated": [`${CHUNKED_HEAD}5\r\nhello\r\n`, null],
  "/short-body": [`${SIZED_HEAD}${"x".repeat(20_000)}`, null],
  "/big-then-break": [`${CHUNKED_HEAD}100000\r\n${"y".repeat(0x100000)}\r\n`, "-6\r\nQ"],
  "/big-short": [`HTTP/1.1 200 OK\r\ncontent-length: 9000000\r\n\r\n${"x".repeat(4_000_000)}`, null],
  "/at-once": [`${CHUNKED_HEAD}1\r\nZ\r\n-6\r\nQ`, ""],
  "/ok": ["HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", null],
};
const ATTACKS = Object.keys(REPLIES).filter((p) => p !== "/ok");

async function startAttackGuest(): Promise<net.Server> {
  const server = net.createServer((sock) => {
    sock.on("error", () => sock.destroy());
    let seen = "";
    sock.on("data", (c) => {
      if (seen.includes("\r\n\r\n")) return;
      seen += c.toString("latin1");
      if (!seen.includes("\r\n\r\n")) return;
      const [first, later] = REPLIES[seen.split(" ")[1] ?? ""] ?? REPLIES["/ok"]!;
      sock.write(first, "latin1");
      setTimeout(() => (later === null ? sock.end() : sock.write(later, "latin1")), 150);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return server;
}

/** A raw HTTP/1.1 download through the proxy: the bytes the client got and how the connection ended. */
function rawDownload(path: string): Promise<{ raw: string; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(proxyPort, "127.0.0.1");
    let raw = "";
    sock.on("data", (c) => (raw += c.toString("latin1")));
    sock.on("error", () => resolve({ raw, complete: false }));
    sock.on("close", () => {
      // Complete means a whole HTTP/1.1 message: a chunked body ends with its last chunk, a sized one has its bytes.
      const [head = "", body = ""] = raw.split("\r\n\r\n", 2).length === 2 ? [raw.slice(0, raw.indexOf("\r\n\r\n")), raw.slice(raw.indexOf("\r\n\r\n") + 4)] : [raw, ""];
      const length = /content-length:\s*(\d+)/i.exec(head)?.[1];
      const complete = /transfer-encoding:\s*chunked/i.test(head) ? /(^|\r\n)0\r\n\r\n$/.test(body) : length !== undefined && Buffer.byteLength(body, "latin1") >= Number(length);
      resolve({ raw, complete });
    });
    sock.setTimeout(10_000, () => {
      sock.destroy();
      reject(new Error(`no end of the download of ${path} within 10 s`));
    });
    sock.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nX-Access-Token: ${token}\r\nConnection: close\r\n\r\n`);
  });
}

/** The proxy's count of guest bodies that broke framing after the head. */
async function bodyFramingErrors(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith('sandbox_envd_proxy_guest_framing_errors_total{phase="body"}'));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
}

test("every body attack is a failed download for fetch and for a raw client; the process prints only JSON; each is counted and logged once at warn", async () => {
  const before = await bodyFramingErrors();
  for (const path of ATTACKS) {
    // The head may or may not have left before the violation arrived (one read can hold both): either way the
    // download fails, through the fetch or through its body.
    const body = await fetch(`http://127.0.0.1:${proxyPort}${path}`, { headers: { host, "x-access-token": token } })
      .then((r) => r.arrayBuffer())
      .then(
        () => "complete",
        () => "failed",
      );
    expect([path, body]).toEqual([path, "failed"]);
    const raw = await rawDownload(path);
    expect([path, raw.complete]).toEqual([path, false]);
  }
  // Two downloads per attack.
  await until(async () => (await bodyFramingErrors()) - before === ATTACKS.length * 2, "the framing errors counted", 10_000, 50);
  const warned = child.logLines("guest broke the response framing");
  expect(warned).toHaveLength(ATTACKS.length * 2);
  for (const w of warned) {
    expect(w.level).toBe("warn");
    expect(w.phase).toBe("body");
    expect(w.sandbox).toBe(publicId);
    expect(JSON.stringify(w)).not.toContain(token);
  }
  // Give Bun's own reporting the time it took before (it printed as the stream errored) and check every line.
  await Bun.sleep(200);
  const raw = child.output().split("\n").filter((l) => l.trim() !== "" && !isJson(l));
  expect(raw).toEqual([]);
}, 60_000);

test("an honest download through the same proxy still completes", async () => {
  const r = await fetch(`http://127.0.0.1:${proxyPort}/ok`, { headers: { host, "x-access-token": token } });
  expect([r.status, await r.text()]).toEqual([200, "ok"]);
  const raw = await rawDownload("/ok");
  expect(raw.complete).toBe(true);
});

function isJson(line: string): boolean {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}
