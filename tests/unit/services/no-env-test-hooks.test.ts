// No binary reads a test hook from its environment. Each binary is the bundle of its main.ts that
// `bun build --compile` embeds, so bundling the same entry point and reading it shows every environment name the
// shipped program can react to. A wait that tests shorten goes through the programmatic entry instead
// (startApiserver / startEnvdProxy options, docs/fleet.md), where an operator's environment cannot reach it.
import { expect, test } from "bun:test";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..", "..");

for (const [binary, ready] of [
  ["sandbox-apiserver", "e2b surface listening"],
  ["sandbox-envd-proxy", "envd proxy listening"],
  ["sandbox-e2b", "e2b surface listening"],
] as const) {
  test(`the compiled ${binary} reads no *_SYNC_TIMEOUT_MS or *_TEST_* environment switch`, async () => {
    const out = await Bun.build({ entrypoints: [join(root, "services", binary, "main.ts")], target: "bun" });
    expect(out.success).toBe(true);
    const text = (await Promise.all(out.outputs.map((o) => o.text()))).join("\n");
    expect(text).toContain(ready); // the whole binary, not an empty bundle
    expect(text.match(/"[A-Z][A-Z0-9_]*(_SYNC_TIMEOUT_MS|_TEST_[A-Z0-9_]*)"/g) ?? []).toEqual([]);
  }, 60_000);
}
