// The envd proxy's answer to a wake slower than --wake-timeout (shared/relay/answers.ts wakeTimedOutAnswer), read by
// the stock JS SDK (e2b 2.51) as it reads the proxy: never as a sandbox that is gone. A plain 504 is that for envd REST
// and isRunning(), but connect-es maps an HTTP 504 on a Connect call to `unavailable`, which commands.run turned into
// SandboxNotFoundError ("Sandbox is probably not running anymore"): a Connect request gets deadline_exceeded.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { wakeTimedOutAnswer } from "#shared/relay/answers.ts";

const WORDS = "sandbox was asleep and did not wake in time (within 30s); retry later";
let server: ReturnType<typeof Bun.serve>;
let sb: Sandbox;
beforeAll(() => {
  server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => wakeTimedOutAnswer(req, 30_000) });
  const Ctor = Sandbox as unknown as new (o: Record<string, unknown>) => Sandbox;
  sb = new Ctor({ sandboxId: "sb-asleep", envdAccessToken: "t", envdVersion: "0.8.0", sandboxUrl: `http://127.0.0.1:${server.port}`, domain: "wake.test", apiKey: "unused" });
});
afterAll(() => server.stop(true));

const failure = (p: Promise<unknown>) => p.then(() => "served", (e: Error) => `${e.name}: ${e.message}`);

test("commands.run (a Connect stream) and files.list (a Connect unary call) read a timeout with the proxy's words, not a gone sandbox", async () => {
  for (const said of [await failure(sb.commands.run("echo hi")), await failure(sb.files.list("/"))]) {
    expect(said).toStartWith(`TimeoutError: [deadline_exceeded] ${WORDS}`);
    expect(said).not.toContain("not running anymore");
  }
});

test("envd REST and isRunning() keep the plain 504 envelope: an error with the words, never false", async () => {
  expect(await failure(sb.files.read("/etc/hostname"))).toBe(`SandboxError: 504: ${WORDS}`);
  expect(await failure(sb.isRunning())).toBe(`SandboxError: 504: ${WORDS}`);
  const plain = await fetch(`http://127.0.0.1:${server.port}/files?path=/x`);
  expect([plain.status, await plain.json()]).toEqual([504, { code: 504, message: WORDS }]);
});
