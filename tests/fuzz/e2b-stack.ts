// A sandbox-e2b stack for fuzzing (simulated sandboxd nodes: development substrate): prints one JSON line
// {apiUrl, key} when ready and serves until SIGTERM/SIGINT. Used by tests/fuzz/schemathesis.sh.
import { KEY_A, startStack } from "../integration/e2b/harness.ts";

const s = await startStack({ nodes: 2, pools: ["img:1/none/small=8", "img:1/egress/small=2"] });
console.log(JSON.stringify({ apiUrl: s.apiUrl, key: KEY_A }));
const stop = async () => {
  await s.stop();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
