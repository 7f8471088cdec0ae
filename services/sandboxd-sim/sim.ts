// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The programmatic entry points: startSandboxdSim(opts) starts one simulated node on a real HTTP listener and
// returns its control handle; startSimCluster(n, opts) starts n nodes on one shared clock, peers of each other
// (a mesh). Every knob of sandboxd.md §7 is a method of the handle, and the same knobs are reachable over
// `/_sim/<knob>` (admin.ts).
import { unknownSandbox } from "./errors.ts";
import { FakeClock, type SimClock, SkewedRealClock } from "./clock.ts";
import { createIdSource, type IdSource } from "./ids.ts";
import { Mesh } from "./mesh.ts";
import { SimNode, type MemoryReport, type NodeOptions } from "./node.ts";
import { parseKeySpec } from "./pools.ts";
import { createApp } from "./routes/index.ts";
import { Faults, type FaultRoute, type Latency, type ListFailMode } from "./http/index.ts";
import { RequestLog, type RequestLogEntry } from "./http/index.ts";
import { NodeServer } from "./http/index.ts";
import { createAdminHandler } from "./admin.ts";
import { startFakeGuest, type FakeGuest, type FakeGuestOptions } from "./guest.ts";

/** Which sandboxes guest agents give on this host (namespaced or the process-sandbox fallback), for startup lines. */
export { hostIsolation, isolationLine, type Isolation } from "./guest/index.ts";
import type { TenantConfig } from "./auth.ts";
import { readPreviewUrl, type PreviewGrant } from "./preview.ts";
import type { Claim } from "./claims.ts";
import { PoolEntry, type InfoWire, type PoolEntryInput, type PoolKey } from "#shared/sandboxd/index.ts";

/** The node's own settings (rootToken, tenants, maxClaims, provisionLatencyMs, previewAdvertise, …; see node.ts). */
type NodeSettings = Omit<NodeOptions, "addr" | "clock" | "ids" | "mesh">;

export interface SimOptions extends NodeSettings {
  /** Listen host (default 127.0.0.1) and port (default 0 = any free port). */
  host?: string;
  port?: number;
  /** The address claims report as owner_addr; default the bound host:port. */
  advertiseAddr?: string;
  /** Initial pool set, as PUT /v1/pools entries or `template/net/size=warm` specs. */
  pools?: (PoolEntryInput | string)[];
  /** Deterministic ids/tokens/digests. */
  seed?: string | number;
  /** "fake" (time moves only by advance) or "real" (default). A cluster shares one. */
  clock?: "fake" | "real" | SimClock;
  /** Serve /_sim/* on the node's own listener (default true). */
  adminOnNode?: boolean;
  /** Internal: the mesh registry shared by a cluster. */
  mesh?: Mesh;
  ids?: IdSource;
}

export interface SandboxdSim {
  readonly url: string;
  readonly addr: string;
  readonly node: SimNode;
  readonly clock: SimClock;
  readonly requests: RequestLogEntry[];
  readonly log: RequestLog;
  // time
  advance(ms: number): void;
  reapNow(): { reaped: string[]; archived: string[]; deleted: string[] };
  refillNow(): void;
  /** One idle-clock sweep now (it also runs every second on the clock): hibernates and archives idle claims. */
  idleNow(): { hibernated: string[]; archived: string[] };
  // faults
  latency(route: FaultRoute, ms: Latency | null): void;
  /** `when: "after"` handles the request (a claim is committed) and then never answers. */
  hang(route: FaultRoute, count?: number, when?: "before" | "after"): void;
  /** `pathIncludes`: only requests whose path contains it (one sandbox's id), so other sandboxes are unaffected. */
  fail(route: FaultRoute, status: number, body?: unknown, count?: number, pathIncludes?: string): void;
  reset(route: FaultRoute, when: "before" | "after", count?: number): void;
  listFails(mode: ListFailMode): void;
  clearFaults(): void;
  /**
   * Every wake of a hibernated or archived sandbox (verb or data-plane access) takes `ms` on the node's clock (a
   * fake clock: until `advance` passes it); callers meanwhile share the one wake. null or 0: instant. Kept across
   * restart and clearFaults, like the provision latency.
   */
  slowWake(ms: number | null): void;
  // pools
  setWarm(key: PoolKey | string, n: number): void;
  setGolden(key: PoolKey | string, golden: boolean): void;
  provisionFails(key: PoolKey | string, fails?: boolean): void;
  atCapacity(reason: string | null): void;
  setProvisionLatency(ms: number): void;
  // capacity and credentials
  setMaxClaims(n: number): void;
  setTenant(name: string, token: string, cap?: number): void;
  removeTenant(name: string): void;
  setTokens(root: string | null, tenants?: Record<string, TenantConfig>): void;
  drain(): void;
  undrain(): void;
  // out-of-band node actions
  expire(id: string): void;
  hibernate(id: string): void;
  archive(id: string): void;
  failVmm(id: string, reason?: string): void;
  vanish(id: string): void;
  // mesh and data plane
  peers(addrs: string[]): void;
  forceRedirect(targets: string[] | null, requirePromoted?: boolean): void;
  attachGuest(id: string, port: number, target: number | string): void;
  detachGuest(id: string, port: number): void;
  /** The upstream `GET …/agent` (Upgrade: silkd) splices to; without one the agent relay answers 502. */
  attachAgent(id: string, target: number | string): void;
  attachFakeGuest(id: string, opts?: FakeGuestOptions): Promise<FakeGuest>;
  /**
   * The sandbox's guest agent (envd, guest port 49983) stops answering, as a wedged envd in a running VM: the ports
   * relay still opens (the VM is up) and its connection stays silent; `false` brings the agent back. Nothing else
   * about the sandbox changes (it stays running; pause, release and its other ports work).
   */
  wedgeGuest(id: string, wedged?: boolean): Promise<void>;
  /** The preview listener's advertise address (host:port or origin), or null: no listener, preview → 501. */
  setPreview(advertise: string | null): void;
  /** What a preview URL minted by this node grants (sandbox, port, owner, expiry), or null when it is not ours. */
  previewOf(url: string): PreviewGrant | null;
  // inspection
  claims(): Claim[];
  info(): InfoWire;
  /** The memory the node's sandboxes hold now; a hibernated or archived one holds none (docs/sleep.md). */
  memory(): MemoryReport;
  // lifecycle
  restart(): Promise<void>;
  stop(): Promise<void>;
}

function makeClock(c: SimOptions["clock"]): SimClock {
  if (c && typeof c === "object") return c;
  return c === "fake" ? new FakeClock() : new SkewedRealClock();
}

export async function startSandboxdSim(opts: SimOptions = {}): Promise<SandboxdSim> {
  // Everything that is not about the listener or the shared clock/ids/mesh is the node's own setting.
  const { host = "127.0.0.1", port, advertiseAddr, pools, seed, clock: clockOpt, adminOnNode, mesh: meshOpt, ids: idsOpt, ...settings } = opts;
  const clock = makeClock(clockOpt);
  const ids = idsOpt ?? createIdSource(seed);
  const mesh = meshOpt ?? new Mesh();
  const node = new SimNode({ ...settings, addr: "", clock, ids, mesh });
  const faults = new Faults();
  const log = new RequestLog();
  const guests: FakeGuest[] = [];
  // wedgeGuest: one silent listener per node (accepts, reads and discards, never writes), and the 49983 upstream
  // each wedged sandbox had before (an attached fake guest) to put back.
  let silent: Bun.TCPSocketListener | undefined;
  const unwedged = new Map<string, { host: string; port: number } | undefined>();
  let handle!: SandboxdSim;
  const server = new NodeServer({
    node,
    app: createApp(node),
    faults,
    log,
    // One handler for the node's lifetime; `handle` is read per request, so it may be assigned below.
    admin: adminOnNode === false ? undefined : createAdminHandler(() => handle),
  });
  await server.listen(host, port ?? 0);
  const bound = `${host.includes(":") ? `[${host}]` : host}:${server.port}`;
  node.addr = advertiseAddr ?? bound;
  mesh.register(node);
  if (pools?.length) {
    node.pools.replace(pools.map((p) => (typeof p === "string" ? poolSpec(p) : PoolEntry.parse(p))));
  }
  node.listening = true;
  node.start();

  const key = (k: PoolKey | string) => parseKeySpec(k);
  handle = {
    url: `http://${bound}`,
    addr: node.addr,
    node,
    clock,
    log,
    get requests() {
      return log.entries;
    },
    advance: (ms) => clock.advance(ms),
    reapNow: () => node.reapNow(),
    refillNow: () => node.pools.refill(),
    idleNow: () => node.idleSweep(),
    latency: (route, ms) => faults.latency(route, ms),
    hang: (route, count = 1, when = "before") => faults.push(route, { kind: "hang", when }, count),
    fail: (route, status, body, count = 1, pathIncludes) => faults.push(route, { kind: "fail", status, body }, count, pathIncludes),
    reset: (route, when, count = 1) => faults.push(route, { kind: "reset", when }, count),
    listFails: (mode) => void (faults.listMode = mode),
    clearFaults: () => faults.clear(),
    slowWake: (ms) => {
      if (ms !== null && (!Number.isFinite(ms) || ms < 0)) throw new Error(`slowWake: expected a duration in ms >= 0 or null, got ${ms}`);
      node.wakeLatencyMs = ms ?? 0;
    },
    setWarm: (k, n) => node.pools.setWarm(key(k), n),
    setGolden: (k, b) => node.pools.setGolden(key(k), b),
    provisionFails: (k, fails = true) => node.pools.provisionFails(key(k), fails),
    atCapacity: (reason) => node.atCapacity(reason),
    setProvisionLatency: (ms) => void (node.pools.provisionLatencyMs = ms),
    setMaxClaims: (n) => void (node.maxClaims = n),
    setTenant: (name, token, cap = 0) => node.setTenant(name, token, cap),
    removeTenant: (name) => node.removeTenant(name),
    setTokens: (root, tenants) => node.setTokens(root, tenants),
    drain: () => node.drain(),
    undrain: () => node.undrain(),
    expire: (id) => node.expire(id),
    hibernate: (id) => node.hibernate(id),
    archive: (id) => node.archive(id),
    failVmm: (id, reason) => node.failVmm(id, reason),
    vanish: (id) => node.vanish(id),
    peers: (addrs) => void (node.peerAddrs = [...addrs]),
    forceRedirect: (targets, requirePromoted = false) => void (node.forced = targets ? { targets: [...targets], requirePromoted } : null),
    attachGuest: (id, port, target) => node.attachGuest(id, port, target),
    detachGuest: (id, port) => node.detachGuest(id, port),
    attachAgent: (id, target) => node.attachAgent(id, target),
    attachFakeGuest: async (id, o = {}) => {
      const c = node.table.get(id);
      const g = await startFakeGuest({ claimToken: c?.token, clock, ...o });
      guests.push(g);
      node.attachGuest(id, 49983, g.port);
      return g;
    },
    wedgeGuest: async (id, wedged = true) => {
      const key = `${id}:49983`;
      if (!wedged) {
        if (!unwedged.has(id)) return;
        const before = unwedged.get(id);
        unwedged.delete(id);
        if (before) node.guests.set(key, before);
        else node.guests.delete(key);
        return;
      }
      if (!node.table.get(id)) throw unknownSandbox();
      const listener = (silent ??= Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } }));
      if (!unwedged.has(id)) unwedged.set(id, node.guests.get(key));
      node.guests.set(key, { host: "127.0.0.1", port: listener.port });
    },
    setPreview: (advertise) => void (node.previewAdvertise = advertise),
    previewOf: (url) => readPreviewUrl(node.previewSecret, url),
    claims: () => node.table.all(),
    info: () => node.info(),
    memory: () => node.memory(),
    restart: async () => {
      // Claims and the PUT pool set survive; the drain flag clears; warm VMs are rebuilt. Connections drop.
      node.listening = false;
      node.stop();
      await server.close();
      node.restartState();
      await server.listen(host, server.port);
      node.listening = true;
      node.start();
    },
    stop: async () => {
      node.listening = false;
      node.stop();
      mesh.unregister(node);
      await server.close();
      await Promise.all(guests.map((g) => g.stop()));
      silent?.stop(true);
      await node.guestHost?.stop();
    },
  };
  return handle;
}

/** The idle fields a pool spec may carry after its warm count (docs/sleep.md). */
const SPEC_IDLE_FIELDS: Record<string, "idle_hibernate_seconds" | "archive_after_seconds" | "archive_delete_after_seconds"> = {
  idle: "idle_hibernate_seconds",
  archive: "archive_after_seconds",
  delete: "archive_delete_after_seconds",
};

/**
 * `base:24.04/none/small=5` -> a pool entry with warm 5 (warm defaults to 0 when `=n` is absent). The idle policy
 * may follow, comma-separated, in seconds: `base:24.04/none/small=5,idle=60,archive=600,delete=86400`. A template
 * never contains `=`, so the first `=` ends the key. Validated as PUT /v1/pools validates (egress + idle refused).
 */
export function poolSpec(spec: string): PoolEntry {
  const eq = spec.indexOf("=");
  const keyPart = eq >= 0 ? spec.slice(0, eq) : spec;
  const [warmText, ...opts] = eq >= 0 ? spec.slice(eq + 1).split(",") : ["0"];
  const warm = Number(warmText);
  if (!/^\d+$/.test(warmText ?? "") || !Number.isSafeInteger(warm)) throw new Error(`invalid warm count in pool spec ${JSON.stringify(spec)}`);
  const idle: Partial<Record<(typeof SPEC_IDLE_FIELDS)[string], number>> = {};
  for (const o of opts) {
    const [name = "", value = ""] = o.split("=");
    const field = SPEC_IDLE_FIELDS[name];
    if (!field || !/^\d+$/.test(value)) throw new Error(`invalid pool option ${JSON.stringify(o)} in ${JSON.stringify(spec)}: expected idle=N, archive=N or delete=N (seconds)`);
    idle[field] = Number(value);
  }
  const k = parseKeySpec(keyPart);
  const r = PoolEntry.safeParse({ ...k, warm, ...idle });
  if (!r.success) throw new Error(`invalid pool spec ${JSON.stringify(spec)}: ${r.error.issues.map((i) => i.message).join("; ")}`);
  return r.data;
}

export interface SimCluster {
  readonly nodes: SandboxdSim[];
  readonly clock: SimClock;
  readonly urls: string[];
  advance(ms: number): void;
  stop(): Promise<void>;
}

/** n nodes on one clock and one mesh registry, every node a peer of every other. */
export async function startSimCluster(n: number, opts: SimOptions & { ports?: number[] } = {}): Promise<SimCluster> {
  const clock = makeClock(opts.clock);
  const ids = opts.ids ?? createIdSource(opts.seed);
  const mesh = new Mesh();
  const nodes: SandboxdSim[] = [];
  for (let i = 0; i < n; i++) {
    nodes.push(await startSandboxdSim({ ...opts, port: opts.ports?.[i] ?? (i === 0 ? opts.port : 0), clock, ids, mesh }));
  }
  if (n > 1) for (const x of nodes) x.peers(nodes.filter((y) => y !== x).map((y) => y.addr));
  return {
    nodes,
    clock,
    urls: nodes.map((x) => x.url),
    advance: (ms) => clock.advance(ms),
    stop: async () => void (await Promise.all(nodes.map((x) => x.stop()))),
  };
}
