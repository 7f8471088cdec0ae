// The fleet view from sandboxd itself (mesh mode, docs/fleet.md): dial the seeds, learn peers from each node's
// `GET /v1/info`, key nodes by their `advertise_addr`, and poll every known node (`GET /v1/info` +
// `GET /v1/sandboxes`) each tick. A node that stays silent keeps its last snapshot for MISSED_TICKS_BEFORE_LEAVE
// ticks, then leaves. Used by sandbox-e2b (and so by the local stack); no Kubernetes anywhere.
import { StartupError } from "../config/index.ts";
import { LoopRunner } from "../lifecycle/index.ts";
import { type Clock, realClock } from "../clock/index.ts";
import { DemandMeter } from "./demand.ts";
import { errorChain, type Logger } from "../log/index.ts";
import { SandboxdClient } from "../sandboxd/index.ts";
import { SandboxdForbidden, SandboxdUnauthorized } from "../sandboxd/index.ts";
import { DEFAULT_NET, DEFAULT_SIZE, parseWireTime, type Info, type SandboxRow, type TemplateInfo } from "../sandboxd/index.ts";
import type { FleetEntry, FleetNode, FleetSource, FleetTemplate } from "./types.ts";
import { namespaceOfName } from "./view.ts";

/** A node answering no poll for this many ticks in a row leaves the fleet (e2b.md §7: "3 ticks, then leaves"). */
export const MISSED_TICKS_BEFORE_LEAVE = 3;
/** Per-call budget of a poll; a tick is never held longer than this by one slow node. */
const POLL_TIMEOUT_MS = 5_000;
/** Bound on the nodes polled at once. */
const POLL_CONCURRENCY = 16;
/** changed() hints closer together than this share one early poll. */
const MIN_EARLY_POLL_GAP_MS = 200;

export interface MeshFleetOptions {
  seeds: readonly string[];
  /** Fleet root token; every call carries it. */
  token: string;
  pollMs: number;
  log: Logger;
  /** Test seam: the client for an address (default: a SandboxdClient with the root token). */
  clientFor?: (address: string) => SandboxdClient;
  clock?: Clock;
}

interface Tracked {
  node: FleetNode;
  missed: number;
}

/** Row -> entry. Archived counts as paused (`Hibernated`), as the inventory publisher maps it. */
export function entryFromRow(row: SandboxRow): FleetEntry {
  const name = row.claim_ref || row.id;
  const deadline = row.deadline ? parseWireTime(row.deadline) : null;
  const claimedAt = row.claimed_at ? parseWireTime(row.claimed_at) : null;
  return {
    id: row.id,
    name,
    namespace: namespaceOfName(name),
    phase: row.hibernated || row.archived ? "Hibernated" : "Running",
    template: row.key.template,
    net: row.key.net,
    size: row.key.size,
    ...(deadline === null ? {} : { deadline }),
    ...(claimedAt === null ? {} : { claimedAt }),
    ...(row.metadata ? { metadata: row.metadata } : {}),
    ...(row.cpu_count === undefined ? {} : { cpuCount: row.cpu_count }),
    ...(row.mem_total_bytes === undefined ? {} : { memoryBytes: row.mem_total_bytes }),
  };
}

/** A node's `/v1/info` template as the fleet view holds it. */
export function fleetTemplateOf(t: TemplateInfo): FleetTemplate {
  const createdAt = parseWireTime(t.created_at);
  return {
    template: t.key.template,
    net: t.key.net ?? DEFAULT_NET,
    size: t.key.size ?? DEFAULT_SIZE,
    contentDigest: t.content_digest,
    ...(createdAt === null ? {} : { createdAt }),
    ...(t.labels ? { labels: t.labels } : {}),
  };
}

export function nodeFromInfo(info: Info, rows: readonly SandboxRow[], publishedAt: number): FleetNode {
  return {
    name: info.advertise_addr,
    address: info.advertise_addr,
    publishedAt,
    pools: info.pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target })),
    templates: info.templates.map(fleetTemplateOf),
    entries: rows.map(entryFromRow),
  };
}

export class MeshFleet implements FleetSource {
  private readonly o: MeshFleetOptions;
  private readonly clientFor: (address: string) => SandboxdClient;
  private readonly clock: Clock;
  private readonly tracked = new Map<string, Tracked>();
  /** Addresses learnt from `peers` (advertise addresses of other nodes). */
  private readonly peerAddrs = new Set<string>();
  /** Seed address -> the advertise address it reported, so a seed is not dialled twice under two names. */
  private readonly seedAdvertise = new Map<string, string>();
  private snapshot: readonly FleetNode[] = [];
  private readonly loop: LoopRunner;
  private started: Promise<void> | undefined;
  private kick: (() => void) | undefined;
  private lastPollAt = 0;
  /** Nodes a changed() hint asked to refresh before the next full tick; "*" = all of them. */
  private readonly dirty = new Set<string>();
  /** Claim rate and refill time per key, observed on every snapshot (docs/fleet.md "Demand"). */
  readonly demand: DemandMeter;
  /**
   * One client per polled address, kept across ticks: a client built per poll (and its logger child) cost ~12% of a
   * core idle in a mesh of nodes. Pruned to the addresses still polled after each full tick.
   */
  private readonly clients = new Map<string, SandboxdClient>();

  constructor(o: MeshFleetOptions) {
    this.o = o;
    this.clock = o.clock ?? realClock;
    this.demand = new DemandMeter(this.clock);
    this.clientFor = o.clientFor ?? ((address) => new SandboxdClient({ baseUrl: SandboxdClient.baseUrlFor(address), token: o.token, log: o.log, timeoutMs: POLL_TIMEOUT_MS, retry: { attempts: 1 } }));
    this.loop = new LoopRunner((signal) => this.run(signal));
  }

  nodes(): readonly FleetNode[] {
    return this.snapshot;
  }

  /**
   * First contact, then the poll loop. Fails (StartupError) when no seed answers, when a seed refuses the token,
   * or when a seed reports no `advertise_addr` (e2b.md §7).
   */
  ready(): Promise<void> {
    this.started ??= this.firstContact().then(() => this.loop.start());
    return this.started;
  }

  changed(address?: string): void {
    this.dirty.add(address ?? "*");
    this.kick?.();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  private async firstContact(): Promise<void> {
    const results = await Promise.allSettled(this.o.seeds.map((seed) => this.client(seed).info()));
    const failures: string[] = [];
    results.forEach((r, i) => {
      const seed = this.o.seeds[i]!;
      if (r.status === "fulfilled") {
        if (!r.value.advertise_addr) {
          throw new StartupError(`sandboxd seed ${seed} reports no advertise_addr; set it in the node's config`, { flag: "--sandboxd-seeds", seed });
        }
        return;
      }
      const err = r.reason as Error;
      if (err instanceof SandboxdUnauthorized || err instanceof SandboxdForbidden) {
        throw new StartupError(`sandboxd seed ${seed} refused the root token (check --sandboxd-token / --sandboxd-token-file)`, { flag: "--sandboxd-token", seed }, err);
      }
      failures.push(`${seed}: ${errorChain(err)}`); // the cause says why (a TLS seed: "unable to verify the first certificate")
    });
    if (failures.length === this.o.seeds.length) {
      throw new StartupError(`no sandboxd seed answered: ${failures.join("; ")}`, { flag: "--sandboxd-seeds" });
    }
    await this.pollOnce();
    if (this.snapshot.length === 0) throw new StartupError("no sandboxd seed could be listed", { flag: "--sandboxd-seeds" });
  }

  private async run(signal: AbortSignal): Promise<void> {
    let nextFull = this.clock.now() + this.o.pollMs;
    while (!signal.aborted) {
      // Wait for the next full tick, cut short by stop() or by a changed() hint (coalesced: hints closer together
      // than MIN_EARLY_POLL_GAP_MS share one early refresh). The wait's own controller leaves no timer behind.
      const wait = new AbortController();
      const onStop = () => wait.abort();
      signal.addEventListener("abort", onStop, { once: true });
      this.kick = () => {
        this.kick = undefined;
        this.clock.after(Math.max(0, this.lastPollAt + MIN_EARLY_POLL_GAP_MS - this.clock.now()), () => wait.abort());
      };
      if (this.dirty.size > 0) this.kick();
      await this.clock.sleep(Math.max(0, nextFull - this.clock.now()), wait.signal);
      signal.removeEventListener("abort", onStop);
      this.kick = undefined;
      if (signal.aborted) break;
      if (this.clock.now() >= nextFull || this.dirty.has("*")) {
        this.dirty.clear();
        await this.pollOnce();
        nextFull = this.clock.now() + this.o.pollMs;
      } else if (this.dirty.size > 0) {
        // Only the nodes we changed: one info + list each, not the whole fleet.
        const targets = [...this.dirty].filter((a) => this.tracked.has(a));
        this.dirty.clear();
        this.lastPollAt = this.clock.now();
        await Promise.all(targets.map((a) => this.pollNode(a)));
        this.publish();
      }
    }
  }

  /** One tick: every known node (and every seed not yet known by its advertise address) is polled. */
  async pollOnce(): Promise<void> {
    this.lastPollAt = this.clock.now();
    const targets = new Set<string>([...this.tracked.keys(), ...this.peerAddrs]);
    for (const seed of this.o.seeds) {
      const adv = this.seedAdvertise.get(seed);
      if (!adv || !targets.has(adv)) targets.add(seed);
    }
    const list = [...targets];
    const answered = new Set<string>();
    for (let i = 0; i < list.length; i += POLL_CONCURRENCY) {
      await Promise.all(
        list.slice(i, i + POLL_CONCURRENCY).map(async (address) => {
          const node = await this.pollNode(address);
          if (!node) return;
          answered.add(node.name);
        }),
      );
    }
    for (const [name, t] of this.tracked) {
      if (answered.has(name)) continue;
      t.missed += 1;
      if (t.missed >= MISSED_TICKS_BEFORE_LEAVE) {
        this.tracked.delete(name);
        this.peerAddrs.delete(name);
        this.o.log.warn({ node: name, ticks: t.missed }, "sandboxd node silent for too many polls; it leaves the fleet view");
      }
    }
    // Forget the clients of addresses no longer polled (nodes that left, seeds now known by another name).
    const polled = new Set<string>([...this.tracked.keys(), ...this.peerAddrs, ...this.o.seeds]);
    for (const address of this.clients.keys()) if (!polled.has(address)) this.clients.delete(address);
    this.publish();
  }

  private client(address: string): SandboxdClient {
    let c = this.clients.get(address);
    if (!c) {
      c = this.clientFor(address);
      this.clients.set(address, c);
    }
    return c;
  }

  /** A new immutable snapshot from the tracked nodes, sorted by name. */
  private publish(): void {
    this.snapshot = [...this.tracked.values()].map((t) => t.node).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.demand.observe(this.snapshot);
  }

  private async pollNode(address: string): Promise<FleetNode | undefined> {
    const client = this.client(address);
    try {
      const [info, rows] = await Promise.all([client.info(), client.list()]);
      if (!info.advertise_addr) {
        this.o.log.warn({ address }, "sandboxd node reports no advertise_addr; skipped");
        return undefined;
      }
      if (this.o.seeds.includes(address)) this.seedAdvertise.set(address, info.advertise_addr);
      for (const p of info.peers ?? []) if (p && p !== info.advertise_addr) this.peerAddrs.add(p);
      const node = nodeFromInfo(info, rows, this.clock.now());
      this.tracked.set(node.name, { node, missed: 0 });
      return node;
    } catch (err) {
      this.o.log.debug({ address, err }, "sandboxd poll failed");
      return undefined;
    }
  }
}
