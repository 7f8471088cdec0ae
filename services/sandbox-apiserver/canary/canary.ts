// The canary (docs/operations.md "Canary", issue 21 item 4): off by default (--canary-interval 0). Every interval,
// per fresh node and per pool key it holds a warm target for, it walks the path users take — claim a warm VM at that
// node, envd /init, run one command, release — and records the time from the claim to the command's end
// (sandbox_canary_time_to_first_command_seconds) and the outcome (sandbox_canary_runs_total). Its claims carry
// claim_ref `sandbox-canary/<node>`, which the demand meter leaves out of the claim rate (CANARY_NAMESPACE), and each
// claim id is told to the meter (recordCanary), so a canary released before the node's next publish is not taken for
// a stranger's claim (an unexplained warm drop). Every
// replica probes (the canary proves each serving process's path, not the leader's); rounds never overlap.
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { Clock } from "#shared/clock/index.ts";
import { accessTokenHash, initEnvd } from "#shared/e2b/index.ts";
import { looksBuilt } from "#shared/built-templates/index.ts";
import { CANARY_NAMESPACE, type DemandMeter, type InventoryRecord } from "#shared/fleet/index.ts";
import type { PoolKey } from "#shared/sandboxd/index.ts";
import { type NodeClients, NODE_FANOUT, mapBounded } from "../sandboxes/index.ts";
import type { ApiserverMetrics } from "../serving/index.ts";
import { runCommand } from "./envd-command.ts";

/** The canary's claims live at most this long on a node, so a crashed process leaves nothing behind for long. */
export const CANARY_TTL_SECONDS = 60;
export const CANARY_SCRIPT = "echo canary";

export interface CanaryOptions {
  fresh: () => readonly InventoryRecord[];
  clients: NodeClients;
  rootToken: string;
  intervalMs: number;
  clock: Clock;
  log: Logger;
  metrics: Pick<ApiserverMetrics, "canaryRuns" | "canaryTimeToFirstCommand">;
  /** Told every canary claim id, so that the claim is never counted as demand. */
  demand?: Pick<DemandMeter, "recordCanary">;
}

export type CanaryOutcome = "ok" | "claim_failed" | "init_failed" | "command_failed" | "release_failed";

export class Canary {
  private timer: { cancel(): void } | undefined;
  private running: Promise<void> | undefined;
  private readonly stopping = new AbortController();
  /** Rounds completed (tests wait on it). */
  rounds = 0;

  constructor(private readonly o: CanaryOptions) {}

  start(): void {
    const tick = () => {
      if (this.stopping.signal.aborted) return;
      this.running = this.round().finally(() => {
        this.running = undefined;
        if (!this.stopping.signal.aborted) this.timer = this.o.clock.after(this.o.intervalMs, tick);
      });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.timer?.cancel();
    await this.running;
  }

  /** One round: every (fresh node with an address, pooled key) once, at most NODE_FANOUT at a time. */
  async round(): Promise<void> {
    const probes: { node: InventoryRecord; key: PoolKey }[] = [];
    for (const node of this.o.fresh()) {
      if (!node.address) continue;
      for (const p of node.fleet.pools) if (p.target > 0) probes.push({ node, key: { template: p.template, net: p.net, size: p.size } });
    }
    await mapBounded(probes, NODE_FANOUT, async ({ node, key }) => {
      const outcome = await this.probe(node, key);
      this.o.metrics.canaryRuns.inc({ node: node.name, template: key.template, net: key.net, size: key.size, outcome });
    });
    this.rounds++;
  }

  private async probe(node: InventoryRecord, key: PoolKey): Promise<CanaryOutcome> {
    const client = this.o.clients.for(node.address);
    const log = this.o.log.child({ node: node.name, template: key.template, net: key.net, size: key.size });
    const t0 = this.o.clock.monotonic();
    let claimed;
    try {
      claimed = await client.claim(
        { template: key.template, net: key.net, size: key.size, ttl_seconds: CANARY_TTL_SECONDS, claim_ref: `${CANARY_NAMESPACE}/${node.name}`, no_redirect: true },
        { followRedirects: false, signal: this.stopping.signal },
      );
    } catch (e) {
      log.warn({ err: (e as Error).message }, "canary claim failed");
      return "claim_failed";
    }
    this.o.demand?.recordCanary(key, claimed.id, node.name);
    const outcome = await this.use(node, key, claimed.id, t0, log, client);
    try {
      await client.release(claimed.id, claimed.token ? { token: claimed.token } : {});
    } catch (e) {
      log.warn({ err: (e as Error).message, sandbox: claimed.id }, "canary release failed; the claim expires with its TTL");
      return outcome === "ok" ? "release_failed" : outcome;
    }
    return outcome;
  }

  /** envd /init, then the command; the histogram records the claim-to-command time of a success. */
  private async use(node: InventoryRecord, key: PoolKey, claimId: string, t0: number, log: Logger, client: ReturnType<NodeClients["for"]>): Promise<CanaryOutcome> {
    const target = { address: node.address, claimId, rootToken: this.o.rootToken };
    const accessToken = randomBytes(16).toString("hex");
    try {
      // A pooled built template's clone holds its build's envd token: hand it the canary's through instance
      // metadata first, as every claimer of a built template does (docs/decisions.md "Built templates belong to
      // their namespace").
      if (looksBuilt(key.template)) await client.putInstanceMetadata(claimId, { accessTokenHash: accessTokenHash(accessToken) });
      await initEnvd(target, { accessToken, timestamp: new Date(this.o.clock.now()).toISOString() });
    } catch (e) {
      log.warn({ err: (e as Error).message, sandbox: claimId }, "canary envd /init failed");
      return "init_failed";
    }
    try {
      const r = await runCommand(target, accessToken, CANARY_SCRIPT, "user", this.stopping.signal);
      if (r.exitCode !== 0) throw new Error(`exit code ${r.exitCode}`);
    } catch (e) {
      log.warn({ err: (e as Error).message, sandbox: claimId }, "canary command failed");
      return "command_failed";
    }
    const seconds = (this.o.clock.monotonic() - t0) / 1000;
    this.o.metrics.canaryTimeToFirstCommand.observe({ node: node.name, template: key.template, net: key.net, size: key.size }, seconds);
    return "ok";
  }
}
