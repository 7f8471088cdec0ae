import { startNodeCluster } from "#tests/kube/node/cluster.ts";
const t0 = performance.now();
const c = await startNodeCluster((l) => console.log(`[${((performance.now() - t0) / 1000).toFixed(1)}s] ${l}`));
console.log("started", c.startSeconds, c.dir);
console.log(JSON.stringify(await c.guards.counters()));
if (process.argv.includes("--hold")) await Bun.sleep(Number(process.env.HOLD ?? 60000));
const problems = await c.stop();
console.log("stopped", problems);
