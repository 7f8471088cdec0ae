// The ports relay (sandboxd.md §5.6): a raw byte splice to a TCP echo guest with half-close, and every error.
import { afterEach, describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { ROOT, call, claim, rawRequest, startEcho, upgradeHead, until } from "./helpers.ts";

let sims: SandboxdSim[] = [];
const stops: (() => Promise<void>)[] = [];
async function sim(): Promise<SandboxdSim> {
  const s = await startSandboxdSim({ rootToken: ROOT, clock: "fake" });
  sims.push(s);
  return s;
}
afterEach(async () => {
  await Promise.all([...sims.map((s) => s.stop()), ...stops.map((f) => f())]);
  sims = [];
  stops.length = 0;
});
const headComplete = (s: string) => s.includes("\r\n\r\n") && (s.startsWith("HTTP/1.1 101") || s.includes("}"));

describe("sandboxd-sim ports relay", () => {
  test("splices raw bytes both ways to the attached guest and carries a half-close across", async () => {
    const s = await sim();
    const echo = await startEcho();
    stops.push(echo.stop);
    const c = (await claim(s)).json;
    s.attachGuest(c.id, 8080, echo.port);
    const conn = await rawRequest(s.url, upgradeHead(`/v1/sandboxes/${c.id}/ports/8080`, c.token) + "early-bytes|", headComplete);
    expect(conn.data()).toStartWith("HTTP/1.1 101 Switching Protocols\r\n");
    conn.sock.write("\u0000binary\u00ff|");
    await until(() => conn.data().endsWith("early-bytes|\u0000binary\u00ff|"), "the early bytes");
    conn.sock.end(); // half-close toward the guest; the guest answers and closes its side
    await echo.ended;
    await until(() => conn.data().endsWith("<bye>"), "<bye>");
    expect(s.requests.at(-1)!.outcome).toBe("upgraded");
  });

  test("answers the relay errors: 400 port, 401 missing bearer, 404 wrong token, 426 no upgrade, 409 failed or paused, 502 unreachable", async () => {
    const s = await sim();
    const c = (await claim(s)).json;
    const at = (port: string | number) => `/v1/sandboxes/${c.id}/ports/${port}`;
    const raw = async (path: string, token: string | null) => (await rawRequest(s.url, upgradeHead(path, token), headComplete)).data();

    expect(await raw(at(0), c.token)).toContain('{"error":"port must be 1-65535"}');
    expect(await raw(at(70000), c.token)).toStartWith("HTTP/1.1 400");
    expect(await raw(at(80), null)).toContain('{"error":"missing bearer token"}');
    expect(await raw(at(80), "acme")).toContain('{"error":"unknown sandbox"}');
    const plain = await call(s, "GET", at(80), { token: c.token });
    expect([plain.status, plain.json]).toEqual([426, { error: "upgrade required" }]);
    expect(await raw(at(1), c.token)).toContain('{"error":"guest port unreachable"}'); // nothing attached
    s.attachGuest(c.id, 81, "127.0.0.1:1");
    expect(await raw(at(81), c.token)).toStartWith("HTTP/1.1 502");

    s.archive(c.id);
    expect(await raw(at(80), ROOT)).toStartWith("HTTP/1.1 409"); // passive never unarchives
    s.failVmm(c.id, "boom");
    expect(await raw(at(80), c.token)).toContain('{"error":"sandbox failed"}');
  });

  test("wedgeGuest: the relay to the guest agent (49983) opens and stays silent, other ports still answer; false brings the agent back", async () => {
    const s = await sim();
    const echo = await startEcho();
    stops.push(echo.stop);
    const c = (await claim(s)).json;
    s.attachGuest(c.id, 49983, echo.port);
    s.attachGuest(c.id, 8080, echo.port);
    const open = async (port: number) => {
      const conn = await rawRequest(s.url, upgradeHead(`/v1/sandboxes/${c.id}/ports/${port}`, ROOT), headComplete);
      expect(conn.data()).toStartWith("HTTP/1.1 101 Switching Protocols\r\n");
      return conn;
    };
    await s.wedgeGuest(c.id);
    const wedged = await open(49983);
    const head = wedged.data().length;
    wedged.sock.write("GET /health HTTP/1.1\r\nHost: envd\r\n\r\n");
    // Another port of the same sandbox answers meanwhile: the sandbox is up, only its agent is silent.
    const other = await open(8080);
    other.sock.write("ping|");
    await until(() => other.data().endsWith("ping|"), "the echo on port 8080");
    await s.wedgeGuest(c.id, false);
    const back = await open(49983);
    back.sock.write("pong|");
    await until(() => back.data().endsWith("pong|"), "the agent's echo after the wedge");
    // The wedged connection never got a byte back, though two later ones were answered.
    expect(wedged.data().length).toBe(head);
    for (const conn of [wedged, other, back]) conn.sock.destroy();
    await expect(s.wedgeGuest("sb-unknown")).rejects.toThrow("unknown sandbox");
  });

  test("a root-token relay to a running sandbox is passive but works", async () => {
    const s = await sim();
    const echo = await startEcho();
    stops.push(echo.stop);
    const c = (await claim(s)).json;
    s.attachGuest(c.id, 49983, `127.0.0.1:${echo.port}`);
    const conn = await rawRequest(s.url, upgradeHead(`/v1/sandboxes/${c.id}/ports/49983`, ROOT), headComplete);
    expect(conn.data()).toStartWith("HTTP/1.1 101");
    conn.sock.write("ping");
    await until(() => conn.data().endsWith("ping"), "ping");
    conn.sock.destroy();
  });
});

describe("sandboxd-sim fake envd guest", () => {
  test("checks X-Access-Token, accepts a valid signed /files URL and refuses a wrong or expired signature", async () => {
    const { startFakeGuest, fileSignature } = await import("../../../services/sandboxd-sim/guest.ts");
    const clock = new FakeClock(1_000_000); // unix second 1000
    const g = await startFakeGuest({ accessToken: "acc", clock });
    stops.push(g.stop);
    const base = `http://127.0.0.1:${g.port}`;
    expect((await fetch(`${base}/init`, { method: "POST" })).status).toBe(401);
    expect((await fetch(`${base}/init`, { method: "POST", headers: { "x-access-token": "acc" } })).status).toBe(204);
    expect((await fetch(`${base}/files?path=/f`, { method: "POST", headers: { "x-access-token": "acc" }, body: "data" })).status).toBe(200);
    const url = (sig: string, exp?: number) =>
      `${base}/files?path=/f&username=user&signature=${encodeURIComponent(sig)}${exp !== undefined ? `&signature_expiration=${exp}` : ""}`;
    const good = await fetch(url(fileSignature("/f", "read", "user", "acc", 2_000), 2_000));
    expect([good.status, await good.text()]).toEqual([200, "data"]);
    expect((await fetch(url(fileSignature("/f", "read", "user", "acc", 999), 999))).status).toBe(401);
    expect((await fetch(url(fileSignature("/f", "read", "user", "other")))).status).toBe(401);
    expect((await fetch(url(fileSignature("/f", "write", "user", "acc")))).status).toBe(401);
  });

  test("attachFakeGuest's guest judges signature_expiration on the simulated node's fake clock", async () => {
    const { fileSignature } = await import("../../../services/sandboxd-sim/guest.ts");
    const s = await sim();
    const c = (await claim(s)).json;
    const g = await s.attachFakeGuest(c.id, { accessToken: "acc" });
    const base = `http://127.0.0.1:${g.port}`;
    expect((await fetch(`${base}/files?path=/f`, { method: "POST", headers: { "x-access-token": "acc" }, body: "data" })).status).toBe(200);
    // Signed to expire 60 s after the node's (fake) now: good until the node's clock moves past it.
    const exp = Math.floor(s.clock.now() / 1000) + 60;
    const signed = `${base}/files?path=/f&username=user&signature=${encodeURIComponent(fileSignature("/f", "read", "user", "acc", exp))}&signature_expiration=${exp}`;
    const before = await fetch(signed);
    expect([before.status, await before.text()]).toEqual([200, "data"]);
    s.advance(61_000);
    const after = await fetch(signed);
    expect([after.status, await after.json()]).toEqual([401, { code: 401, message: "signature expired" }]);
  });

  test("the node's guest agents judge signature_expiration on the node's fake clock", async () => {
    const { fileSignature } = await import("../../../services/sandboxd-sim/guest.ts");
    const s = await startSandboxdSim({ rootToken: ROOT, clock: "fake", guestAgents: true });
    sims.push(s);
    const c = (await claim(s)).json;
    const target = s.node.guestHost?.target(c.id, 49983);
    if (!target) throw new Error(`no guest agent for ${c.id}`);
    const relay = `http://${target.host}:${target.port}`;
    expect((await fetch(`${relay}/init`, { method: "POST", body: JSON.stringify({ accessToken: "acc" }) })).status).toBe(204);
    const form = new FormData();
    form.append("file", new Blob(["data"]), "f");
    expect((await fetch(`${relay}/files?path=/home/user/f`, { method: "POST", headers: { "x-access-token": "acc" }, body: form })).status).toBe(200);
    const exp = Math.floor(s.clock.now() / 1000) + 60;
    const sig = encodeURIComponent(fileSignature("/home/user/f", "read", "user", "acc", exp));
    const signed = `${relay}/files?path=/home/user/f&username=user&signature=${sig}&signature_expiration=${exp}`;
    const before = await fetch(signed);
    expect([before.status, await before.text()]).toEqual([200, "data"]);
    s.advance(61_000);
    const after = await fetch(signed);
    expect(after.status).toBe(401);
    expect(((await after.json()) as { message: string }).message).toBe("signature expired");
  });
});
