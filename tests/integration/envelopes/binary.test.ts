// The same odd inputs against sandbox-e2b as a real process (REST surface and in-process proxy), for what only a
// process shows: nothing but pino's JSON lines reaches stdout/stderr (Bun's development mode printed 14 raw lines of
// source and stack per CONNECT), and the proxy's series are served on --metrics-bind-address alone.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { deriveAccessToken } from "#shared/e2b/index.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { spawnE2b, type Child } from "../e2b/process.ts";
import { envelopeOf, leaks, oddRequests, rawRequest } from "./raw.ts";

const ROOT = "root-binary-envelopes";
const SECRET = "secret-binary-envelopes";
const DOMAIN = "bin.test";
let sim: SandboxdSim;
let dir: string;
let child: Child;
let guest: net.Server;
let apiPort: number;
let proxyPort: number;
let metricsPort: number;
let sandboxHost: string;
let token: string;

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=1"] });
  // A guest that answers every WebSocket handshake with a status no Response can carry.
  guest = net.createServer((sock) => {
    sock.on("error", () => sock.destroy());
    sock.once("data", () => sock.end("HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n"));
  });
  await new Promise<void>((r) => guest.listen(0, "127.0.0.1", () => r()));
  const claimed = await new SandboxdClient({ baseUrl: sim.url, token: ROOT }).claim({ template: "img", claim_ref: "team/x" });
  sim.attachGuest(claimed.id, 3000, (guest.address() as net.AddressInfo).port);
  sandboxHost = `3000-${claimed.id.replace("sb_", "sb-")}.${DOMAIN}`;
  token = deriveAccessToken(SECRET, claimed.token);
  dir = mkdtempSync(join(tmpdir(), "envelopes-bin-"));
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
  apiPort = Number((await child.waitFor("e2b surface listening")).port);
  proxyPort = Number((await child.waitFor("envd proxy listening")).port);
  metricsPort = Number((await child.waitFor("metrics listening")).port);
}, 60_000);
afterAll(async () => {
  await child?.stop();
  guest?.close();
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("every odd request to the REST surface and the proxy is a 4xx envelope; the process writes only JSON log lines", async () => {
  for (const p of [apiPort, proxyPort]) {
    for (const [name, head] of oddRequests("127.0.0.1")) {
      const r = await rawRequest(p, `${head}\r\nConnection: close`);
      expect({ p, name, leaks: leaks(r.raw), fourxx: r.status >= 400 && r.status < 500, code: envelopeOf(r.body)?.code }).toEqual({ p, name, leaks: [], fourxx: true, code: r.status });
    }
  }
  const ws = await rawRequest(
    proxyPort,
    `GET /socket HTTP/1.1\r\nHost: ${sandboxHost}\r\nX-Access-Token: ${token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13`,
  );
  expect([ws.status, envelopeOf(ws.body)?.code, leaks(ws.raw)]).toEqual([502, 502, []]);
  // Everything the process printed parses as a JSON log line (no raw stack, no development page on stderr).
  const raw = child.output().split("\n").filter((l) => l.trim() !== "" && !isJson(l));
  expect(raw).toEqual([]);
});

test("the proxy's series are on the metrics listener; the public proxy answers /metrics as a path naming no sandbox", async () => {
  const m = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
  expect(m.status).toBe(200);
  const text = await m.text();
  expect(text).toContain("sandbox_envd_proxy_requests_total");
  expect(text).toContain('code="405"');
  const pub = await fetch(`http://127.0.0.1:${proxyPort}/metrics`);
  expect([pub.status, await pub.json()]).toEqual([400, { code: 400, message: "no sandbox in the request host or headers" }]);
});

function isJson(line: string): boolean {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}
