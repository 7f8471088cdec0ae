// Issue 7 case 9: no test hook in the product. The binary is the bundle of services/vk-sandbox/main.ts that
// `bun build --compile` embeds, so bundling the same entry point (what scripts/build.ts compiles, minus the
// runtime) and reading it shows exactly which environment switches the shipped daemon can react to. A test hook
// there (an env variable that makes the daemon withhold a claim reply) is a way to strand VMs in production.
import { expect, test } from "bun:test";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..", "..", "..");

test("case 9: the compiled vk-sandbox carries no test hook (no VK_SANDBOX_TEST_* switch, no hold-after-claim)", async () => {
  const out = await Bun.build({ entrypoints: [join(root, "services", "vk-sandbox", "main.ts")], target: "bun" });
  expect(out.success).toBe(true);
  const text = (await Promise.all(out.outputs.map((o) => o.text()))).join("\n");
  expect(text.length).toBeGreaterThan(100_000); // the whole daemon, not an empty bundle
  expect(text).toContain("vk-sandbox ready");
  expect(text.match(/VK_SANDBOX_TEST[A-Z_]*/g) ?? []).toEqual([]);
  expect(text).not.toMatch(/hold.?after.?claim/i);
}, 60_000);
