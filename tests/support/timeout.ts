// Preloaded by bunfig.toml for every `bun test`. Bun 1.4.5 ignores a `timeout` key in bunfig's [test] table, so
// without this each test that names no timeout gets bun's 5 s: integration tests that take a second or two on an
// idle machine then fail only on a loaded one ("this test timed out after 5000ms"). A test that can legitimately take
// longer still names its own timeout; this is the default budget for the rest.
import { setDefaultTimeout } from "bun:test";

setDefaultTimeout(60_000);
