// The per-namespace relay cap (security review of issue 17's bounds): without it, one tenant with two sandboxes could
// hold every one of the process's relay slots (64 per sandbox, 128 in all) with requests its own guests never answer,
// and every other tenant got 503. Now a tenant's relays stop at --max-relays-per-namespace with a 429, and another
// tenant is still served. sandbox-e2b runs as its own process with the real flags.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { e2bProcessFixture, spawnE2b, type Child, type E2bProcessFixture } from "../e2b/process.ts";
import { createSandbox, startHostileGuest, type HostileGuest } from "./hostile.ts";

const ROOT = "root-nscap";
const DOMAIN = "nscap.test";
const KEY_A = "e2b_nscapnscapnscapaaaa";
const KEY_B = "e2b_nscapnscapnscapbbbb";
const CAP = 4;
let fixture: E2bProcessFixture;
let child: Child;
let api = "";
let proxy = "";
let silent: HostileGuest;
let dir = "";

beforeAll(async () => {
  silent = await startHostileGuest("silent");
  fixture = await e2bProcessFixture({ rootToken: ROOT, apiKey: KEY_A, domain: DOMAIN });
  dir = mkdtempSync(join(tmpdir(), "nscap-"));
  const keys = join(dir, "tenant-keys");
  writeFileSync(keys, `${KEY_A} team-a\n${KEY_B} team-b\n`);
  const args = fixture.args.map((a) => (a.startsWith("--e2b-api-key-file=") ? `--e2b-api-key-file=${keys}` : a));
  child = spawnE2b([...args, `--envd-proxy-max-relays-per-namespace=${CAP}`, "--envd-proxy-guest-handshake-timeout=20s"]);
  api = `http://127.0.0.1:${(await child.waitFor("e2b surface listening")).port}`;
  proxy = `http://127.0.0.1:${(await child.waitFor("envd proxy listening")).port}`;
});
afterAll(async () => {
  await silent?.stop();
  await child?.stop();
  await fixture?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

test(`one tenant's never-answered requests stop at ${CAP} relays with a 429 naming the tenant cap; another tenant is still relayed`, async () => {
  const a1 = await createSandbox(api, KEY_A);
  const a2 = await createSandbox(api, KEY_A);
  const b = await createSandbox(api, KEY_B);
  for (const s of [a1, a2]) fixture.cluster.nodes[0]!.attachGuest(s.claimId, 3000, silent.port);
  const held = new AbortController();
  const ask = (s: { id: string; token: string }, port: number, path: string) =>
    fetch(`${proxy}${path}`, { headers: { host: `${port}-${s.id}.${DOMAIN}`, "x-access-token": s.token }, signal: held.signal });
  try {
    // CAP requests across team-a's two sandboxes, each held open by a guest that never answers.
    const pending = Array.from({ length: CAP }, (_, i) => ask(i % 2 ? a2 : a1, 3000, "/hang").catch(() => undefined));
    await Bun.sleep(300); // let them reach the guest: each holds its slot from the dial on
    expect(silent.open()).toBe(CAP);
    const refused = await ask(a2, 3000, "/one-more");
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({ code: 429, message: `too many concurrent requests to this tenant's sandboxes (limit ${CAP})` });
    // team-b's sandbox (its envd port, answered by the fixture's test guest) is relayed as before.
    const other = await ask(b, 49983, "/health");
    expect(other.status).toBe(204);
    held.abort();
    await Promise.all(pending);
  } finally {
    held.abort();
  }
}, 60_000);
