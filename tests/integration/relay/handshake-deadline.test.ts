// Issue 17 case 5: a guest that never answers a WebSocket upgrade (or a request head) no longer leaks its tunnel.
// A client that leaves closes the tunnel at once; the others get 504 at --envd-proxy-guest-handshake-timeout. Counted
// on the proxy's gauges and on the node's side (the silent guest's open connections: the simulator closes its guest
// connection when the proxy closes the tunnel).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { e2bProcessFixture, spawnE2b, type Child, type E2bProcessFixture } from "../e2b/process.ts";
import { waitFor } from "#tests/support/wait.ts";
import { createSandbox, dialRawWs, gauge, startHostileGuest, type HostileGuest, e2bListeners } from "./hostile.ts";

const ROOT = "root-hsd";
const DOMAIN = "hsd.test";
const KEY = "e2b_hsdhsdhsdhsdhsd";
// Long enough that 50 dials reach the silent guest before the first of them meets it on a machine busy enough to
// spread them over seconds (at 4 s, an extra load beside a contended run made early tunnels time out first).
const DEADLINE_S = 12;
let fixture: E2bProcessFixture;
let child: Child;
let api = "";
let proxyPort = 0;
let proxyUrl = "";
/** The process's metrics listener: the proxy's gauges are served there only. */
let metricsUrl = "";
let silent: HostileGuest;

beforeAll(async () => {
  silent = await startHostileGuest("silent");
  fixture = await e2bProcessFixture({ rootToken: ROOT, apiKey: KEY, domain: DOMAIN });
  // 50 handshakes to one tenant's sandbox: the deadline is under test, not the namespace cap (namespace-cap.test.ts).
  child = spawnE2b([...fixture.args, `--envd-proxy-guest-handshake-timeout=${DEADLINE_S}s`, "--metrics-bind-address=127.0.0.1:0", "--envd-proxy-max-relays-per-namespace=0"]);
  ({ api, proxyPort, proxyUrl, metricsUrl } = await e2bListeners(child));
});
// Guests first: their sockets close the tunnels, so the proxy has no open stream to drain on SIGTERM.
afterAll(async () => {
  await silent?.stop();
  await child?.stop();
  await fixture?.stop();
}, 30_000);

test("50 silent WebSocket handshakes: the 25 clients that leave close their tunnels at once, the rest get 504 at the deadline; nothing stays open", async () => {
  const sbx = await createSandbox(api, KEY);
  fixture.cluster.nodes[0]!.attachGuest(sbx.claimId, 3000, silent.port);
  const host = `3000-${sbx.id}.${DOMAIN}`;
  const started = performance.now();
  const clients = Array.from({ length: 50 }, () => dialRawWs(proxyPort, host, sbx.token));
  await waitFor("50 upgrades at the silent guest", () => silent.open() === 50, 20_000, 20);
  expect(await gauge(metricsUrl, "sandbox_envd_proxy_open_tunnels")).toBe(50);
  // Half the clients give up: their sockets close before any answer.
  const leaving = performance.now();
  for (const c of clients.slice(0, 25)) c.client.sock.destroy();
  await waitFor("the leavers' tunnels closed on the node", () => silent.open() === 25, 15_000, 20);
  const leftMs = performance.now() - leaving;
  console.log(`25 clients left: their tunnels closed on the node within ${leftMs.toFixed(0)} ms`);
  expect(leftMs).toBeLessThan(DEADLINE_S * 1000 / 2);
  const answered = await Promise.all(clients.slice(25).map((c) => c.answered));
  const afterMs = performance.now() - started;
  console.log(`25 waiting clients answered ${answered.map((c) => c.status).join(",").slice(0, 40)}… after ${afterMs.toFixed(0)} ms`);
  for (const c of answered) expect(c.status).toBe(504);
  await waitFor("every tunnel closed on the node", () => silent.open() === 0, 10_000, 20);
  await waitFor("the proxy's gauges back at idle", async () => (await gauge(metricsUrl, "sandbox_envd_proxy_open_tunnels")) === 0 && (await gauge(metricsUrl, "sandbox_envd_proxy_active_relays")) === 0, 10_000, 50);
  for (const c of answered) c.sock.destroy();
}, 90_000);

test("a guest that never sends a response head: an aborted request closes its tunnel at once, the others get a JSON 504 at the deadline", async () => {
  const sbx = await createSandbox(api, KEY);
  fixture.cluster.nodes[0]!.attachGuest(sbx.claimId, 3000, silent.port);
  const headers = { host: `3000-${sbx.id}.${DOMAIN}`, "x-access-token": sbx.token };
  const base = silent.accepted();
  const aborts = Array.from({ length: 10 }, () => new AbortController());
  const gone = aborts.map((a) => fetch(`${proxyUrl}/slow`, { headers, signal: a.signal }).catch(() => "aborted"));
  const waiting = Array.from({ length: 10 }, () => fetch(`${proxyUrl}/slow`, { headers }));
  await waitFor("20 requests at the silent guest", () => silent.accepted() - base === 20 && silent.open() === 20, 20_000, 20);
  for (const a of aborts) a.abort();
  expect(await Promise.all(gone)).toEqual(Array(10).fill("aborted"));
  await waitFor("the aborted requests' tunnels closed on the node", () => silent.open() === 10, 3_000, 20);
  const answers = await Promise.all(waiting);
  for (const r of answers) {
    expect(r.status).toBe(504);
    expect(await r.json()).toEqual({ code: 504, message: "the sandbox did not answer in time" });
  }
  await waitFor("every tunnel closed on the node", () => silent.open() === 0, 10_000, 20);
  await waitFor("the proxy's gauges back at idle", async () => (await gauge(metricsUrl, "sandbox_envd_proxy_open_tunnels")) === 0 && (await gauge(metricsUrl, "sandbox_envd_proxy_active_relays")) === 0, 10_000, 50);
}, 90_000);
