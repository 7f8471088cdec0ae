// Scenario 34: SIGTERM while a long stream is open through the relay (sandbox-e2b as its own process): the listener
// stops accepting at once, the open stream is cut after the drain window (at most 10 s), and the process exits 0.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { waitFor } from "#tests/support/wait.ts";
import { e2bProcessFixture, spawnE2b, type E2bProcessFixture } from "../e2b/process.ts";

const ROOT = "root-term";
const KEY = "e2b_termtermterm";
const DOMAIN = "term.test";
let fixture: E2bProcessFixture;

beforeAll(async () => {
  fixture = await e2bProcessFixture({ rootToken: ROOT, apiKey: KEY, domain: DOMAIN });
});
afterAll(async () => {
  await fixture?.stop();
});

test("34: SIGTERM with an open stream: no new connections, the stream is cut within 10 s, exit 0", async () => {
  const child = spawnE2b(fixture.args);
  const api = `http://127.0.0.1:${(await child.waitFor("e2b surface listening")).port}`;
  const proxy = `http://127.0.0.1:${(await child.waitFor("envd proxy listening")).port}`;
  const created = await fetch(`${api}/v2/sandboxes`, { method: "POST", headers: { "x-api-key": KEY }, body: '{"templateID":"img"}' });
  const sbx = (await created.json()) as { sandboxID: string; envdAccessToken: string };
  const stream = await fetch(`${proxy}/stream?n=100000&gap=100`, { headers: { host: `49983-${sbx.sandboxID}.${DOMAIN}`, "x-access-token": sbx.envdAccessToken } });
  const reader = stream.body!.getReader();
  await reader.read();
  const sentAt = Date.now();
  child.proc.kill("SIGTERM");
  // The listener closes as soon as the signal is handled (well before the stream is cut); on a loaded machine
  // handling it can take longer than any fixed pause, so wait for the refusal itself.
  // A fresh connection each time: a pooled one would not show whether the listener still accepts.
  const refused = () =>
    fetch(`${proxy}/healthz`, { keepalive: false }).then(
      async (r) => {
        await r.body?.cancel();
        return false;
      },
      () => true,
    );
  await waitFor("new connections refused", refused, 10_000, 50);
  // Keep reading until the relay cuts the stream.
  let ended = false;
  try {
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
    }
    ended = true;
  } catch {
    ended = true;
  }
  const cutAfter = Date.now() - sentAt;
  expect(ended).toBe(true);
  expect(cutAfter).toBeLessThan(10_500);
  expect(await child.exited).toBe(0);
}, 30_000);
