// The SDK matrix's judge, wire tap and doc writer on their own (no Python, no stack): a wrong answer is a failure
// the suite reports, a known difference carries its reason once, and one client's regeneration leaves the other
// clients' sections alone.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderSection, writeSection } from "#tests/support/python/matrix.ts";
import { cellsFor, judgeStep, judgeWire, REASONS } from "#tests/support/python/verdicts.ts";
import type { ScenarioRecord, ScenarioStep } from "#tests/support/python/scenario.ts";
import { startWireTap, type WireProtocol } from "#tests/support/python/wire-tap.ts";
import { waitFor } from "#tests/support/wait.ts";
import { createCA, issueCertificate } from "#shared/tls/index.ts";

const ok = (call: string, value: unknown): ScenarioStep => ({ call, status: "ok", value, ms: 1 });
const raised = (call: string, type: string): ScenarioStep => ({ call, status: "error", error: { type, message: "m", where: "w" }, ms: 1 });

describe("judgeStep", () => {
  test("commands.run is ok only with hello and exit 0", () => {
    expect(judgeStep(ok("commands.run", { stdout: "hello\n", stderr: "", exit_code: 0 }))[0]).toBe("ok");
    expect(judgeStep(ok("commands.run", { stdout: "", stderr: "", exit_code: 0 }))[0]).toBe("fails");
    expect(judgeStep(raised("commands.run", "TimeoutException"))).toEqual(["fails", "raised TimeoutException: m"]);
  });

  test("a list that agreed only later differs, with the read-your-writes reason; one that never agreed fails", () => {
    expect(judgeStep(ok("Sandbox.list", { at_once: true, agreed: true, after_ms: 3 }))[0]).toBe("ok");
    expect(judgeStep(ok("Sandbox.list", { at_once: false, agreed: true, after_ms: 180 }))).toEqual(["differs", "the new sandbox listed only after 180 ms", REASONS.listLag]);
    expect(judgeStep(ok("Sandbox.list after kill", { at_once: false, agreed: false, after_ms: 10_000 }))[0]).toBe("fails");
  });

  test("get_info after kill must be the SDK's not-found error, as e2b cloud answers", () => {
    expect(judgeStep(raised("Sandbox.get_info after kill", "SandboxNotFoundException"))[0]).toBe("ok");
    expect(judgeStep(ok("Sandbox.get_info after kill", { state: "running" }))[0]).toBe("fails");
    expect(judgeStep(raised("Sandbox.get_info after kill", "SandboxException"))[0]).toBe("fails");
  });

  test("get_info after set_timeout(120) must say running with about two minutes left", () => {
    expect(judgeStep(ok("get_info", { state: "running", seconds_left: 119 }))[0]).toBe("ok");
    expect(judgeStep(ok("get_info", { state: "running", seconds_left: 55 }))[0]).toBe("fails");
  });

  test("a call with no expectation is a failure, not a silent pass", () => {
    expect(judgeStep(ok("files.frobnicate", null))[0]).toBe("fails");
  });
});

describe("the guest's known differences (issue 18, issue 20) are named, anything else fails", () => {
  test("pwd under a host directory differs; a pwd elsewhere fails", () => {
    expect(judgeStep(ok("commands.run(pwd)", { stdout: "/home/user\n", stderr: "", exit_code: 0 }))[0]).toBe("ok");
    expect(judgeStep(ok("commands.run(pwd)", { stdout: "/tmp/g/sb_1/home/user\n", stderr: "", exit_code: 0 }))).toEqual(["differs", expect.any(String), REASONS.guestPaths]);
    expect(judgeStep(ok("commands.run(pwd)", { stdout: "/\n", stderr: "", exit_code: 0 }))[0]).toBe("fails");
  });

  test("a second kill answering true differs; a second create with one Idempotency-Key making a new sandbox differs", () => {
    expect(judgeStep(ok("Sandbox.kill(id) again", false))[0]).toBe("ok");
    expect(judgeStep(ok("Sandbox.kill(id) again", true))[2]).toBe(REASONS.killAgain);
    expect(judgeStep(raised("Sandbox.kill(id) again", "SandboxException"))[0]).toBe("fails");
    expect(judgeStep(ok("Sandbox.create(idempotency_key) twice", { same: true }))[0]).toBe("ok");
    expect(judgeStep(ok("Sandbox.create(idempotency_key) twice", { same: false }))[2]).toBe(REASONS.idempotency);
  });
});

describe("judgeWire", () => {
  const plain = (requested: "1.1" | "2", api: WireProtocol[], sandbox: WireProtocol[] = []) => judgeWire({ requested, tls: false, api, sandbox });
  test("HTTP/2 asked and HTTP/1.1 spoken on plain http differs with its reason; h2c is ok; 1.1 asked must be 1.1", () => {
    expect(plain("2", ["http/1.1"], ["http/1.1"])).toEqual(["differs", "API: 1 × http/1.1; sandbox URL: 1 × http/1.1", REASONS.plainHttp]);
    expect(plain("2", ["h2c"])[0]).toBe("ok");
    expect(plain("1.1", ["http/1.1"])[0]).toBe("ok");
    expect(plain("1.1", ["h2c"])[0]).toBe("fails");
    expect(plain("2", [])[0]).toBe("fails");
    expect(plain("1.1", ["http/1.1"], ["other"])[0]).toBe("fails");
  });

  test("behind a TLS edge the HTTP/2 default must reach h2 on the sandbox URL", () => {
    const edge = (api: WireProtocol[], sandbox: WireProtocol[]) => judgeWire({ requested: "2", tls: true, api, sandbox });
    expect(edge(["http/1.1 (TLS)"], ["h2 (TLS)", "http/1.1 (TLS)"])[0]).toBe("ok");
    expect(edge(["http/1.1 (TLS)"], ["http/1.1 (TLS)"])[0]).toBe("fails");
    expect(edge(["http/1.1"], ["h2 (TLS)"])[0]).toBe("fails");
  });
});

describe("wire tap", () => {
  test("as a TLS edge: notes the ALPN protocol negotiated and forwards the cleartext", async () => {
    const ca = await createCA("tap-test-ca");
    const cert = await issueCertificate({ ca, cn: "127.0.0.1", ips: ["127.0.0.1"], usages: "server" });
    const target = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("through tls") });
    const tap = await startWireTap(`http://127.0.0.1:${target.port}`, { tls: { ...cert, alpn: ["http/1.1"] } });
    try {
      expect(tap.url).toStartWith("https://127.0.0.1:");
      expect(await (await fetch(`${tap.url}/x`, { tls: { ca: ca.certPem } })).text()).toBe("through tls");
      expect(tap.connections()).toEqual(["http/1.1 (TLS)"]);
    } finally {
      await tap.stop();
      await target.stop(true);
    }
  });

  test("forwards bytes both ways and tells an HTTP/1.1 request from an h2c preface", async () => {
    const target = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("through") });
    const tap = await startWireTap(`http://127.0.0.1:${target.port}`);
    try {
      expect(await (await fetch(`${tap.url}/x`)).text()).toBe("through");
      const { port } = new URL(tap.url);
      const sock = net.connect({ host: "127.0.0.1", port: Number(port) });
      await new Promise<void>((r) => sock.once("connect", () => r()));
      sock.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
      await waitFor("the preface to be seen", () => tap.connections().length === 2);
      sock.destroy();
      expect(tap.connections()).toEqual(["http/1.1", "h2c"]);
    } finally {
      await tap.stop();
      await target.stop(true);
    }
  });
});

describe("the doc", () => {
  const dir = mkdtempSync(join(tmpdir(), "sdk-matrix-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const rec = (steps: ScenarioStep[]): ScenarioRecord => ({ client: "e2b (Python)", version: "2.63.0", mode: "sync", http_version: "2", steps, abortedAtExit: false });

  test("one note per reason, shared by every cell that has it; figures of the run stay out", () => {
    const lag = ok("Sandbox.list", { at_once: false, agreed: true, after_ms: 123 });
    const cells = [
      ...cellsFor("mesh", "sync", rec([lag]), { requested: "2", tls: false, api: ["http/1.1"], sandbox: [] }),
      ...cellsFor("mesh", "async", rec([lag]), { requested: "1.1", tls: false, api: ["http/1.1"], sandbox: [] }),
    ];
    const md = renderSection("e2b (Python) 2.63.0", "intro", ["mesh", "full"], cells);
    expect(md).toContain("| `Sandbox.list` | differs [1] | differs [1] |");
    expect(md).toContain("| `HTTP version on the wire` | differs [2] | ok |");
    expect(md).toContain("### full\n\nNot run");
    expect(md).toContain("Totals: 4 cells, 1 ok, 3 differ from e2b cloud, 0 fail.");
    expect(md).not.toContain("123 ms");
  });

  test("a client's regeneration replaces its own section and keeps the others", () => {
    const file = join(dir, "sdk-matrix.md");
    writeSection(file, "e2b-js", "## JS\nfirst");
    writeSection(file, "e2b-python", "## Python\nold");
    writeSection(file, "e2b-python", "## Python\nnew");
    const text = readFileSync(file, "utf8");
    expect(text).toStartWith("# SDK matrix");
    expect(text).toContain("<!-- matrix:e2b-js:begin -->\n## JS\nfirst\n<!-- matrix:e2b-js:end -->");
    expect(text).toContain("<!-- matrix:e2b-python:begin -->\n## Python\nnew\n<!-- matrix:e2b-python:end -->");
    expect(text).not.toContain("old");
  });
});
