// Preloaded by bunfig.toml for every `bun test` (bun ignores a `timeout` key in bunfig's [test] table). Bun 1.4.5
// applies this to the first test file only, so tests/run.ts (what scripts/test.sh runs) also passes `--timeout`,
// which reaches every file; this preload keeps a plain `bun test one.test.ts` at the same budget.
import { setDefaultTimeout } from "bun:test";
import { SUITE_TEST_TIMEOUT_MS } from "./test-timeout.ts";

setDefaultTimeout(SUITE_TEST_TIMEOUT_MS);
