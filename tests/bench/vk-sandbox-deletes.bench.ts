// Requests per deleted Pod (issue 13 item 4): Running sandbox Pods are deleted the way a user does (a graceful
// DELETE), and the apiserver's audit log counts every request the daemon's identity sends for them until they are
// gone and their events written. Upstream's Go daemon sends 2 per deleted Pod (the final DELETE and an event); the
// floor is 1 with events off (the final DELETE, grace 0, UID precondition) and 2 with them (plus one event write).
// Repeats are counted apart: a second DELETE of a Pod answered 404 is a request the daemon did not need.
//
//   bun tests/bench/vk-sandbox-deletes.bench.ts      prints the figures as JSON
import { auditEvents, sandboxPod, startE2eCluster, type AuditEvent, type E2eCluster } from "../e2e/vk-sandbox/cluster.ts";
import { startStack, type Stack } from "../e2e/vk-sandbox/stack.ts";
import { waitFor } from "../support/wait.ts";
import { cores, type Figure } from "./vk-sandbox-pods.bench.ts";

const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

interface DeleteRun {
  pods: number;
  requests: AuditEvent[];
  byKind: Record<string, number>;
  /** DELETEs of a Pod answered 404 (the Pod was already gone). */
  repeats404: number;
}

/** The audit log's "<verb> <resource>[/status] <code>" for one request of the daemon. */
function kindOf(e: AuditEvent): string {
  const m = /\/namespaces\/[^/]+\/([a-z]+)(?:\/[^/?]+)?(\/status)?/.exec(e.requestURI);
  return `${e.verb} ${m ? `${m[1]}${m[2] ?? ""}` : e.requestURI.split("?")[0]} ${e.responseStatus?.code ?? "?"}`;
}

async function deleteRun(e2e: E2eCluster, stack: Stack, ns: string, n: number, events: boolean): Promise<DeleteRun> {
  await e2e.cluster.createNamespace(ns);
  const node = `vk-bench-${ns}`;
  const d = stack.daemon({ node, env: { VK_LOG_LEVEL: "info" }, direct: true, extra: events ? [] : ["--disable-pod-events"] });
  const names = Array.from({ length: n }, (_, i) => `del${i}`);
  let from = 0;
  let to = 0;
  try {
    await d.waitForLog(/vk-sandbox ready/, 60_000);
    for (let i = 0; i < n; i += 25) await Promise.all(names.slice(i, i + 25).map((name) => e2e.kube.createPod(sandboxPod(name, node, { ns }))));
    await waitFor(`${n} Running`, async () => (await e2e.kube.pods(ns)).filter((p) => p.status?.phase === "Running").length === n, 120_000, 250);
    // Let the creates' status writes and events drain, so the window holds only what the deletions cause.
    await Bun.sleep(3_000);
    from = Date.now();
    // A user's delete: graceful (the Pod's own 1 s grace), all at once, as `kubectl delete pods --all` sends them.
    await Promise.all(names.map((name) => e2e.kube.req("DELETE", `/api/v1/namespaces/${ns}/pods/${name}`)));
    await waitFor("pods gone", async () => (await e2e.kube.pods(ns)).length === 0, 120_000, 250);
    // Trailing writes (events, a late repeat DELETE) land within a few seconds; count them too.
    await Bun.sleep(5_000);
    to = Date.now();
  } finally {
    await d.kill("SIGTERM");
  }
  const requests = auditEvents(e2e.auditPath).filter((e) => {
    const t = Date.parse(e.requestReceivedTimestamp);
    return t >= from && t < to && e.verb !== "watch" && e.requestURI.includes(`/namespaces/${ns}/`);
  });
  const byKind: Record<string, number> = {};
  for (const e of requests) byKind[kindOf(e)] = (byKind[kindOf(e)] ?? 0) + 1;
  const repeats404 = requests.filter((e) => e.verb === "delete" && /\/pods\//.test(e.requestURI) && e.responseStatus?.code === 404).length;
  return { pods: n, requests, byKind, repeats404 };
}

export async function deleteFigures(e2e: E2eCluster, stack: Stack, n = 200): Promise<Figure[]> {
  const withEvents = await deleteRun(e2e, stack, "del-ev", n, true);
  const noEvents = await deleteRun(e2e, stack, "del-noev", n, false);
  const cmd = `bun run bench -- deletes (tests/bench/vk-sandbox-deletes.bench.ts, ${n} Running pods deleted at once, audit log of the daemon's identity)`;
  const fig = (name: string, r: DeleteRun, floor: number, floorName: string): Figure => ({
    name,
    value: round(r.requests.length / r.pods),
    unit: "requests/pod",
    command: cmd,
    cores,
    baseline: { name: floorName, value: floor, unit: "requests/pod" },
    anchor: "issue 13: each request once; the upstream Go daemon sends 2 per deleted Pod",
    notes: `${r.requests.length} requests for ${r.pods} pods (${Object.entries(r.byKind)
      .sort()
      .map(([k, v]) => `${k}: ${v}`)
      .join(", ")}); ${r.repeats404} DELETEs answered 404`,
  });
  return [
    fig("apiserver requests per deleted pod, events on", withEvents, 2, "floor: the final DELETE + one event write"),
    fig("apiserver requests per deleted pod, events off", noEvents, 1, "floor: the final DELETE (grace 0, UID precondition)"),
  ];
}

if (import.meta.main) {
  const e2e = await startE2eCluster();
  const stack = await startStack(e2e, { pools: ["base=1000"] });
  try {
    console.log(JSON.stringify(await deleteFigures(e2e, stack), null, 2));
  } finally {
    await stack.stop();
    await e2e.stop();
  }
}
