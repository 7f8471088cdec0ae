// The hostile-tenant rig (issue 17): against one deployment, measure the idle proxy, run the second tenant alone
// (baseline), then run it again while the attacker does everything at once (attack), stop the attack and wait for
// the proxy to return to idle (recovery). The result holds every figure; the test decides what must hold.
// Everything is bounded: counts come from RigPlan, every wait has a deadline, and an attack that makes the proxy
// grow past `abortRssBytes` is stopped early (so a broken build cannot take the shared machine down with it).
import { Sandbox } from "e2b";
import { HostileClient, type Outcome } from "./client.ts";
import { floodCommand, type FloodArgs, type FloodResult } from "./flood.ts";
import { HTTP_CASES, WS_CASES, BIG_FRAME_BYTES, type HostileGuest, type HttpCase } from "./guest.ts";
import { gauges, gaugesOffIdle, percentile, rssBytes, sampler } from "./measure.ts";
import { loopLag, type Tenant, type TenantOpts, type TenantRun } from "./tenant.ts";
import { waitFor } from "#tests/support/wait.ts";

export interface Deployment {
  name: string;
  /** The envd proxy's process: RSS and CPU are read from it. */
  proxyPid: number;
  /** The process serving the e2b REST surface, when it is another one (sandbox-apiserver). */
  apiPid?: number;
  proxy: { host: string; port: number };
  /** The proxy's Prometheus page. */
  metricsUrl: string;
  /** Health endpoints that must keep answering 2xx (the proxy's /healthz, the API's). */
  healthUrls: string[];
  domain: string;
  template: string;
  /** SDK options of the attacker's namespace (its own key). */
  attacker: TenantOpts;
  /** Routes a sandbox's guest port to a local port (the simulator's attachGuest on the sandbox's node). */
  attach(publicId: string, port: number, localPort: number): void;
}

export interface RigPlan {
  baselineMs: number;
  attackMs: number;
  recoverMs: number;
  stalledDownloads: number;
  upgradeDrops: number;
  /** Times each hostile HTTP reply is asked for. */
  httpRepeat: number;
  /** Bytes written into the WebSocket whose guest never reads. */
  wsFloodBytes: number;
  /** Anonymous junk-lookup loops, each as fast as the proxy answers (issue 17 case 6: "an anonymous loop"). */
  junkConcurrency: number;
  /** Replies the envd client of the e2b surface meets on the attacker's /metrics (Sandbox.getMetrics). */
  envdReplies: HttpCase[];
  abortRssBytes: number;
  /**
   * Run only these attack parts (default all): stalled, http, ws, upgrade-drop, junk, envd, drain, or one case of a part
   * (http/neg-chunk, envd/huge-length, ws/big-frame; ws/flood is the never-read guest flooded with
   * wsFloodBytes, ws/frame-in one 64 MiB frame toward the guest): for measuring one case alone.
   */
  only?: ReadonlySet<string>;
}

export const DEFAULT_PLAN: RigPlan = {
  baselineMs: 8_000,
  attackMs: 20_000,
  recoverMs: 20_000,
  stalledDownloads: 1_000,
  upgradeDrops: 300,
  httpRepeat: 3,
  wsFloodBytes: 256 * 1024 * 1024,
  junkConcurrency: 2,
  envdReplies: ["neg-chunk", "endless-chunked", "huge-length", "endless-headers", "close-mid-body"],
  abortRssBytes: 1536 * 1024 * 1024,
};

export interface RigResult {
  deployment: string;
  baseline: Summary;
  attack: Summary;
  rss: { idle: number; peakAttack: number; afterRecovery: number; apiIdle?: number; apiPeak?: number };
  cpu: { proxyMax: number; proxyMean: number; apiMax?: number };
  health: { probes: number; failures: string[] };
  gauges: { idle: Record<string, number>; peakAttack: Record<string, number>; offIdleAfter: Record<string, { idle: number; now: number }> };
  /** Connections still open at the hostile guest after recovery (a tunnel the proxy or node kept). */
  guestOpenAfter: number;
  recoveredInMs: number | undefined;
  cases: Record<string, Outcome | string>;
  junk: { sent: number; statuses: Record<string, number> };
  aborted: string | undefined;
}

export interface Summary {
  calls: number;
  p50: number;
  p99: number;
  fresh: number;
  freshP99: number;
  failures: string[];
  /** Event-loop delay p99 (ms) of the tenant's process and of the test's process (guest, node, attack clients). */
  tenantLagP99: number;
  testLagP99: number;
  /** p99 of the floor: a request to a server in the test's process that does nothing (TenantRun.floor), ms. */
  floorP99: number;
  /** The machine's 1-minute load average at the end of the phase (other work on the shared cores shows here). */
  load: number;
  /** p99 per steady call (getInfo, files.write, files.read), ms. */
  p99ByCall: Record<string, number>;
}

const loadAverage = async () => Number((await Bun.file("/proc/loadavg").text().catch(() => "NaN")).split(" ")[0]);

const summary = (r: TenantRun, testLagP99: number, load: number): Summary => ({
  load,
  tenantLagP99: r.loopLagP99,
  floorP99: percentile(r.floor, 99),
  p99ByCall: Object.fromEntries(Object.entries(r.byCall).map(([k, v]) => [k, percentile(v, 99)])),
  testLagP99,
  calls: r.calls,
  p50: percentile(r.latencies, 50),
  p99: percentile(r.latencies, 99),
  fresh: r.fresh.length,
  freshP99: percentile(r.fresh, 99),
  failures: r.failures,
});

/** Process-wide gauges (heap, fds, event loop) move on their own; they are not the relay's state. */
const NOT_STATE = /^(process_|nodejs_|bun_)/;

async function scrape(url: string): Promise<Record<string, number> | undefined> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    return r.ok ? gauges(await r.text()) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One health probe, timed by curl in its own process: this process runs the attack clients, the hostile guest and the
 * node, and on a loaded machine its event loop lags by hundreds of ms (the rig reports it), which a fetch timer here
 * would count against the server. curl's --max-time is the server's answer time alone.
 */
async function healthy(url: string): Promise<string | undefined> {
  const p = Bun.spawn(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2", url], { stdout: "pipe", stderr: "ignore" });
  const status = (await new Response(p.stdout).text()).trim();
  const exit = await p.exited;
  if (exit === 28) return `${url}: TimeoutError`;
  if (exit !== 0) return `${url}: curl exit ${exit}`;
  return status.startsWith("2") ? undefined : `${url}: ${status}`;
}

const GUEST_PORT = 8000;
const ENVD_PORT = 49983;

export async function runRig(d: Deployment, tenant: Tenant, guest: HostileGuest, plan: RigPlan = DEFAULT_PLAN): Promise<RigResult> {
  const want = (part: string) => !plan.only || plan.only.has(part) || [...plan.only].some((o) => o.startsWith(`${part}/`));
  // A part's single case ("http/neg-chunk", "envd/huge-length"): named alone, or its whole part named.
  const wantCase = (part: string, c: string) => !plan.only || plan.only.has(part) || plan.only.has(`${part}/${c}`);
  // The attacker: its own sandbox, whose guest ports (the app port and envd's) are the hostile guest.
  const own = await Sandbox.create(d.template, d.attacker);
  const token = (own as unknown as { envdAccessToken: string }).envdAccessToken;
  d.attach(own.sandboxId, GUEST_PORT, guest.port);
  d.attach(own.sandboxId, ENVD_PORT, guest.port);
  const client = new HostileClient({ proxy: d.proxy, domain: d.domain, sandboxId: own.sandboxId, token, guestPort: GUEST_PORT });
  // The stalled downloads get a sandbox of their own: on one sandbox they would fill its relay slots and every
  // hostile reply above would be refused (429) before reaching the guest.
  const stallBox = await Sandbox.create(d.template, d.attacker);
  d.attach(stallBox.sandboxId, GUEST_PORT, guest.port);
  const stallToken = (stallBox as unknown as { envdAccessToken: string }).envdAccessToken;
  const staller = new HostileClient({ proxy: d.proxy, domain: d.domain, sandboxId: stallBox.sandboxId, token: stallToken, guestPort: GUEST_PORT });
  const ok = await client.httpCase("ok", 5_000);
  if (!ok.status.startsWith("200")) throw new Error(`the hostile guest is not reachable through ${d.name}'s proxy: ${JSON.stringify(ok)}`);

  // Idle: settle, then read the gauges and RSS the recovery must come back to.
  await Bun.sleep(500);
  const idleGauges = (await scrape(d.metricsUrl)) ?? {};
  const idleRss = await rssBytes(d.proxyPid);
  const idleApiRss = d.apiPid ? await rssBytes(d.apiPid) : 0;

  const baseLag = loopLag();
  const baseRun = await tenant.run(plan.baselineMs);
  const baseline = summary(baseRun, baseLag.stop()[0], await loadAverage());

  const proxyS = sampler(d.proxyPid);
  const apiS = d.apiPid ? sampler(d.apiPid) : undefined;
  const cases: RigResult["cases"] = {};
  const health: RigResult["health"] = { probes: 0, failures: [] };
  const peakGauges: Record<string, number> = {};
  let attacking = true;
  let aborted: string | undefined;
  const stopAttack = (why?: string) => {
    if (why && !aborted) aborted = why;
    attacking = false;
  };

  const watch = (async () => {
    while (attacking) {
      for (const u of d.healthUrls) {
        health.probes++;
        const f = await healthy(u);
        if (f) health.failures.push(f);
      }
      const g = await scrape(d.metricsUrl);
      for (const [k, v] of Object.entries(g ?? {})) peakGauges[k] = Math.max(peakGauges[k] ?? -Infinity, v);
      const grown = proxyS.peak() - idleRss;
      if (grown > plan.abortRssBytes) stopAttack(`proxy RSS grew ${(grown / 2 ** 20).toFixed(0)} MiB (over the rig's abort line)`);
      if (apiS && apiS.peak() - idleApiRss > plan.abortRssBytes) stopAttack(`API process RSS grew ${((apiS.peak() - idleApiRss) / 2 ** 20).toFixed(0)} MiB (over the rig's abort line)`);
      // The brake: a server that keeps reading an endless reply would grow without end once the attack stopped.
      if (aborted) guest.closeAll();
      await Bun.sleep(500);
    }
  })();

  const parts: Promise<unknown>[] = [];
  if (want("stalled")) parts.push(staller.stalledDownloads(plan.stalledDownloads).then(() => (cases.stalled = `${plan.stalledDownloads} opened`)));
  if (want("http")) {
    parts.push((async () => {
      for (let i = 0; i < plan.httpRepeat && attacking; i++) {
        await Promise.all(HTTP_CASES.filter((c) => c !== "stall" && wantCase("http", c)).map(async (c) => (cases[`http/${c}`] = await client.httpCase(c, 3_000))));
      }
    })());
  }
  if (want("ws")) {
    parts.push((async () => {
      await Promise.all(WS_CASES.filter((c) => wantCase("ws", c)).map(async (c) => (cases[`ws/${c}`] = await client.wsCase(c, c === "big-frame" ? 10_000 : 5_000))));
      if (wantCase("ws", "flood")) cases["ws/flood"] = await client.wsFlood("never-read", plan.wsFloodBytes, 1024 * 1024, 10_000);
      if (wantCase("ws", "frame-in")) cases["ws/frame-in"] = await client.wsFlood("echo", BIG_FRAME_BYTES, BIG_FRAME_BYTES, 10_000);
    })());
  }
  let junk: RigResult["junk"] = { sent: 0, statuses: {} };
  let flood: ReturnType<typeof Bun.spawn> | undefined;
  if (want("junk") || want("upgrade-drop")) {
    const args: FloodArgs = {
      proxy: d.proxy,
      domain: d.domain,
      sandboxId: own.sandboxId,
      token,
      guestPort: GUEST_PORT,
      ms: plan.attackMs,
      junkConcurrency: want("junk") ? plan.junkConcurrency : 0,
      upgradeDrops: want("upgrade-drop") ? plan.upgradeDrops : 0,
    };
    const proc = Bun.spawn(floodCommand(args), { stdout: "pipe", stderr: "inherit" });
    flood = proc;
    parts.push((async () => {
      const out = await new Response(proc.stdout as ReadableStream<Uint8Array>).text();
      const r = JSON.parse(out.trim().split("\n").at(-1) || "null") as FloodResult | null;
      if (!r) return void (cases.flood = `the flood process printed nothing (exit ${await proc.exited})`);
      junk = r.junk;
      if (want("upgrade-drop")) cases["upgrade-drop"] = `${r.upgraded} of ${plan.upgradeDrops} upgraded then dropped`;
    })());
  }
  let drained: Sandbox[] = [];
  if (want("drain")) {
    // Case 9: one key creating as fast as it can, to drain the warm pool every namespace claims from. Its quota
    // answers 429 (the SDK's RateLimitError); what it did get is held until the attack ends.
    parts.push((async () => {
      const refused: Record<string, number> = {};
      while (attacking) {
        const r = await Sandbox.create(d.template, { ...d.attacker, requestTimeoutMs: 5_000 }).then(
          (sbx) => (drained.push(sbx), "created"),
          (e: Error) => (e.message.match(/^\d{3}/)?.[0] ?? e.name),
        );
        refused[r] = (refused[r] ?? 0) + 1;
        if (r !== "created") await Bun.sleep(20);
      }
      cases.drain = `creates: ${JSON.stringify(refused)}`;
    })());
  }
  if (want("envd")) {
    parts.push((async () => {
      for (const reply of plan.envdReplies) {
        if (!attacking) break;
        if (!wantCase("envd", reply)) continue;
        guest.envdReply = reply;
        const t0 = performance.now();
        const r = await Sandbox.getMetrics(own.sandboxId, { ...d.attacker, requestTimeoutMs: 5_000 }).then(
          (m) => `answered ${JSON.stringify(m).slice(0, 60)}`,
          (e: Error) => `${e.name}: ${e.message.slice(0, 80)}`,
        );
        cases[`envd/${reply}`] = `${r} (${Math.round(performance.now() - t0)} ms)`;
      }
      guest.envdReply = "ok";
    })());
  }

  const attackEnd = setTimeout(() => stopAttack(), plan.attackMs);
  const attackLag = loopLag();
  const attackRun = await tenant.run(plan.attackMs);
  const attacked = summary(attackRun, attackLag.stop()[0], await loadAverage());
  stopAttack();
  clearTimeout(attackEnd);
  flood?.kill("SIGTERM");
  client.closeAll();
  staller.closeAll();
  // Parts bounded by their own deadlines; give them a moment to notice the stop, not forever.
  await Promise.race([Promise.allSettled(parts), Bun.sleep(15_000)]);
  flood?.kill("SIGKILL");
  client.closeAll();
  staller.closeAll();
  await watch;
  const proxyStats = await proxyS.stop();
  const apiStats = await apiS?.stop();

  // The attack's end includes the sandboxes its create flood got (held until now): a per-namespace gauge such as
  // e2b_namespace_sandboxes returns to idle only once they are gone.
  await Promise.all(drained.map((x) => x.kill({ requestTimeoutMs: 5_000 }).catch(() => undefined)));
  drained = [];
  // Recovery: every relay gauge back at idle, the guest holds no connection, health answers.
  const started = performance.now();
  let offIdle: RigResult["gauges"]["offIdleAfter"] = {};
  let recoveredInMs: number | undefined;
  await waitFor("every relay gauge at idle and no guest connection", async () => {
    const now = await scrape(d.metricsUrl);
    offIdle = now ? gaugesOffIdle(idleGauges, now, NOT_STATE) : { "(metrics unreachable)": { idle: 0, now: NaN } };
    return Object.keys(offIdle).length === 0 && guest.open() === 0;
  }, plan.recoverMs, 250).then(
    () => (recoveredInMs = performance.now() - started),
    () => undefined, // not recovered: offIdle and guestOpenAfter say what is left, and the claim fails on them
  );
  for (const u of d.healthUrls) {
    health.probes++;
    const f = await healthy(u);
    if (f) health.failures.push(`after: ${f}`);
  }
  const afterRss = await rssBytes(d.proxyPid).catch(() => NaN);
  const guestOpenAfter = guest.open();
  guest.closeAll(); // what the proxy or the API process still held (counted above) is cut, so teardown cannot hang
  for (const x of [own, stallBox]) await Sandbox.kill(x.sandboxId, { ...d.attacker, requestTimeoutMs: 5_000 }).catch(() => undefined);
  return {
    deployment: d.name,
    baseline,
    attack: attacked,
    rss: { idle: idleRss, peakAttack: proxyStats.peakRss, afterRecovery: afterRss, ...(apiStats ? { apiIdle: idleApiRss, apiPeak: apiStats.peakRss } : {}) },
    cpu: { proxyMax: proxyStats.maxCpu, proxyMean: proxyStats.meanCpu, ...(apiStats ? { apiMax: apiStats.maxCpu } : {}) },
    health,
    gauges: { idle: idleGauges, peakAttack: peakGauges, offIdleAfter: offIdle },
    guestOpenAfter,
    recoveredInMs,
    cases,
    junk,
    aborted,
  };
}

/**
 * What the attack's own code in the test's process adds to a request served there (docs/hostile-tenants.md "The
 * floor"): the rise of the floor's p99 from baseline to attack, never negative.
 */
export function floorRise(r: RigResult): number {
  return Math.max(0, r.attack.floorP99 - r.baseline.floorP99);
}

/** The figures a human reads (docs/hostile-tenants.md is written from these lines). */
export function describeResult(r: RigResult): string {
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  const ms = (x: number) => (Number.isNaN(x) ? "n/a" : `${x.toFixed(1)} ms`);
  const lines = [
    `== hostile rig: ${r.deployment}${r.aborted ? ` (attack aborted: ${r.aborted})` : ""}`,
    `second tenant baseline: ${r.baseline.calls} calls, p50 ${ms(r.baseline.p50)}, p99 ${ms(r.baseline.p99)}, fresh create-then-use ${r.baseline.fresh} (p99 ${ms(r.baseline.freshP99)}), ${r.baseline.failures.length} failed`,
    `second tenant attack:   ${r.attack.calls} calls, p50 ${ms(r.attack.p50)}, p99 ${ms(r.attack.p99)} (${(r.attack.p99 / r.baseline.p99).toFixed(2)}x), fresh ${r.attack.fresh} (p99 ${ms(r.attack.freshP99)}), ${r.attack.failures.length} failed`,
    ...r.attack.failures.slice(0, 5).map((f) => `  failure: ${f}`),
    `p99 per call, baseline -> attack: ${Object.keys(r.baseline.p99ByCall).map((k) => `${k} ${ms(r.baseline.p99ByCall[k]!)} -> ${ms(r.attack.p99ByCall[k] ?? NaN)}`).join(", ")}`,
    `floor (a do-nothing server in the test process) p99, baseline -> attack: ${ms(r.baseline.floorP99)} -> ${ms(r.attack.floorP99)}; tenant p99 less the floor's rise ${ms(r.attack.p99 - floorRise(r))} (${((r.attack.p99 - floorRise(r)) / r.baseline.p99).toFixed(2)}x)`,
    `machine load average (2 cores) at the end of baseline -> attack: ${r.baseline.load} -> ${r.attack.load}`,
    `event-loop delay p99, baseline -> attack: tenant process ${ms(r.baseline.tenantLagP99)} -> ${ms(r.attack.tenantLagP99)}, test process (guest, node, attack clients) ${ms(r.baseline.testLagP99)} -> ${ms(r.attack.testLagP99)}`,
    `proxy RSS: idle ${mib(r.rss.idle)}, peak under attack ${mib(r.rss.peakAttack)} (+${mib(r.rss.peakAttack - r.rss.idle)}), after recovery ${mib(r.rss.afterRecovery)}`,
    ...(r.rss.apiPeak !== undefined ? [`API process RSS: idle ${mib(r.rss.apiIdle!)}, peak under attack ${mib(r.rss.apiPeak)}`] : []),
    `proxy CPU: busiest 250 ms ${(r.cpu.proxyMax * 100).toFixed(0)}%, mean ${(r.cpu.proxyMean * 100).toFixed(0)}%${r.cpu.apiMax !== undefined ? `; API process busiest ${(r.cpu.apiMax * 100).toFixed(0)}%` : ""}`,
    `health: ${r.health.probes} probes, ${r.health.failures.length} failed${r.health.failures.length ? ` (${r.health.failures.slice(0, 3).join("; ")})` : ""}`,
    `gauges at idle: ${JSON.stringify(r.gauges.idle)}`,
    `gauges peak under attack: ${JSON.stringify(r.gauges.peakAttack)}`,
    `recovery: ${r.recoveredInMs !== undefined ? `idle again in ${r.recoveredInMs.toFixed(0)} ms` : `NOT back to idle: ${JSON.stringify(r.gauges.offIdleAfter)}, ${r.guestOpenAfter} guest connections open`}`,
    `junk lookups: ${r.junk.sent} sent, ${JSON.stringify(r.junk.statuses)}`,
    ...Object.entries(r.cases).map(([k, v]) => `  case ${k}: ${typeof v === "string" ? v : `${v.status || "(no status)"} ${v.end} after ${v.ms.toFixed(0)} ms, ${v.bytes} bytes`}`),
  ];
  return lines.join("\n");
}
