// An idle vk-sandbox: requests per second it makes to the apiserver and its resident memory, with 20 Running pods
// and nothing happening. Requests are counted by the apiserver (its audit log of the daemon's ServiceAccount), not
// by the daemon. Published anchor: 0.2 req/s with zero LISTs (anchors A.1, "idle virtual node API load").
// Baselines: for requests, the floor the Lease (10 s) and Node status (60 s) cadences imply (computed, there is
// no cheaper daemon to measure); for RSS, an idle `bun` process holding a timer, measured now.
//
//   bun tests/bench/vk-sandbox-idle.bench.ts      prints the figures as JSON
import { auditEvents, sandboxPod, startE2eCluster, type E2eCluster } from "../e2e/vk-sandbox/cluster.ts";
import { waitFor } from "../support/wait.ts";
import { startStack, type Stack } from "../e2e/vk-sandbox/stack.ts";
import { cores, type Figure } from "./vk-sandbox-pods.bench.ts";
import { rssMiB } from "./idle-rss.bench.ts";

const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;


export async function idleFigures(e2e: E2eCluster, stack: Stack, windowSeconds = 60): Promise<Figure[]> {
  await e2e.cluster.createNamespace("idle");
  const d = stack.daemon({ node: "vk-bench-idle", env: { VK_LOG_LEVEL: "info" }, direct: true });
  await d.waitForLog(/vk-sandbox ready/, 60_000);
  await Promise.all(Array.from({ length: 20 }, (_, i) => e2e.kube.createPod(sandboxPod(`idle${i}`, "vk-bench-idle", { ns: "idle" }))));
  await waitFor("20 Running", async () => (await e2e.kube.pods("idle")).filter((p) => p.status?.phase === "Running").length === 20, 60_000, 250);
  // Let the creates' events and status writes drain before the window opens.
  await Bun.sleep(3_000);
  const from = Date.now();
  await Bun.sleep(windowSeconds * 1000);
  const to = Date.now();
  const rss = rssMiB(d.proc.pid);
  await d.kill("SIGTERM");
  // The audit log records a request when it completes; use the received time, so only requests made in the window
  // count (a watch started earlier and ended inside it does not).
  const inWindow = auditEvents(e2e.auditPath).filter((e) => {
    const t = Date.parse(e.requestReceivedTimestamp);
    return t >= from && t < to && e.verb !== "watch";
  });
  const lists = inWindow.filter((e) => e.verb === "list").length;

  const idleBun = Bun.spawn([process.execPath, "-e", "setInterval(() => {}, 1000)"], { stdio: ["ignore", "ignore", "ignore"] });
  await Bun.sleep(1_500);
  const baseRss = rssMiB(idleBun.pid);
  idleBun.kill();

  const cmd = `bun run bench (tests/bench/vk-sandbox-idle.bench.ts, 20 Running pods, ${windowSeconds} s window)`;
  const floor = 1 / 10 + 1 / 60; // Lease PUT every 10 s; Node status PATCH every 60 s (patched from the last object, no GET)
  return [
    {
      name: "idle daemon requests/s to the apiserver",
      value: round(inWindow.length / windowSeconds, 3),
      unit: "req/s",
      command: cmd,
      cores,
      baseline: { name: "computed floor: Lease PUT every 10 s + Node status PATCH every 60 s", value: round(floor, 3), unit: "req/s" },
      anchor: "0.2 req/s, zero LISTs (anchors A.1)",
      notes: `${inWindow.length} requests in ${windowSeconds} s, ${lists} LISTs; watches excluded (one long-lived stream): ${[...new Set(inWindow.map((e) => e.verb))].join(", ")}`,
    },
    {
      name: "idle daemon RSS",
      value: round(rss),
      unit: "MiB",
      command: cmd,
      cores,
      baseline: { name: "idle bun process holding one timer, same machine", value: round(baseRss), unit: "MiB" },
    },
  ];
}

if (import.meta.main) {
  const e2e = await startE2eCluster();
  const stack = await startStack(e2e);
  try {
    console.log(JSON.stringify(await idleFigures(e2e, stack), null, 2));
  } finally {
    await stack.stop();
    await e2e.stop();
  }
}
