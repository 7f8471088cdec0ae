// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Warm pools (sandboxd.md §6, §5.4). Per key: a target, a warm stack (claims pop the newest: LIFO), the number of
// provisions in flight (`refilling`) and whether the golden base snapshot exists. The refill loop runs every 2 s
// on the node's clock, and at once after a claim, a PUT or an uncordon; it starts `target − warm − refilling`
// provisions (bounded by refillConcurrency), each taking `provisionLatencyMs`. A pool without a golden builds one
// first; a failed golden build is retried after 30 s.
//
// A warm VM is minted with the sandbox id it will carry when claimed, so a test can see which VM a claim popped.
import type { SimClock, Timer } from "./clock.ts";
import type { IdSource } from "./ids.ts";
import { DEFAULT_NET, DEFAULT_SIZE, NETS, SIZES, poolKeyString, type PoolEntry, type PoolKey, type PoolStatus } from "#shared/sandboxd/index.ts";

export const REFILL_INTERVAL_MS = 2_000;
export const GOLDEN_RETRY_MS = 30_000;

export interface WarmVm {
  id: string;
  token: string;
  bornAt: number;
}

export interface Pool {
  key: PoolKey;
  target: number;
  entry: PoolEntry;
  warm: WarmVm[]; // stack: the end is the newest
  refilling: number;
  golden: boolean;
  goldenBuilding: boolean;
  goldenRetryAt: number;
}

export interface PoolOptions {
  clock: SimClock;
  ids: IdSource;
  provisionLatencyMs: number;
  refillConcurrency: number;
}

/** Parse `base:24.04/none/small` (net and size optional from the right; a template may itself contain `/`). */
export function parseKeySpec(spec: string | PoolKey): PoolKey {
  if (typeof spec !== "string") return { template: spec.template, net: spec.net ?? DEFAULT_NET, size: spec.size ?? DEFAULT_SIZE };
  const parts = spec.split("/");
  let net: PoolKey["net"] = DEFAULT_NET;
  let size: PoolKey["size"] = DEFAULT_SIZE;
  const last = parts[parts.length - 1]!;
  if (parts.length > 1 && (SIZES as readonly string[]).includes(last)) {
    size = last as PoolKey["size"];
    parts.pop();
  }
  const mid = parts[parts.length - 1]!;
  if (parts.length > 1 && (NETS as readonly string[]).includes(mid)) {
    net = mid as PoolKey["net"];
    parts.pop();
  }
  const template = parts.join("/");
  if (!template) throw new Error(`invalid pool key spec ${JSON.stringify(spec)}`);
  return { template, net, size };
}

export class Pools {
  private readonly pools = new Map<string, Pool>();
  private readonly failing = new Set<string>();
  private loop: Timer | undefined;
  /** Golden builds and provisions still booting; stop() cancels them so a stopped node boots nothing. */
  private readonly booting = new Set<Timer>();
  draining = false;
  atCapacityReason: string | undefined;
  provisionLatencyMs: number;

  constructor(private readonly o: PoolOptions) {
    this.provisionLatencyMs = o.provisionLatencyMs;
  }

  start(): void {
    this.loop ??= this.o.clock.every(REFILL_INTERVAL_MS, () => this.refill());
  }
  stop(): void {
    this.loop?.cancel();
    this.loop = undefined;
    this.forgetBooting();
  }

  /** Cancels every golden build and provision still booting; they no longer count as in flight. */
  private forgetBooting(): void {
    for (const t of this.booting) t.cancel();
    this.booting.clear();
    for (const p of this.pools.values()) {
      p.refilling = 0;
      p.goldenBuilding = false;
    }
  }

  get(key: PoolKey): Pool | undefined {
    return this.pools.get(poolKeyString(key));
  }
  all(): Pool[] {
    return [...this.pools.values()];
  }
  configured(key: PoolKey): boolean {
    return this.pools.has(poolKeyString(key));
  }
  warmCount(key: PoolKey): number {
    return this.draining ? 0 : (this.get(key)?.warm.length ?? 0);
  }

  /** Whole-set replacement: keys not listed are retired (warm destroyed); a lowered target trims at once. */
  replace(entries: PoolEntry[]): void {
    const next = new Map<string, Pool>();
    for (const e of entries) {
      const key: PoolKey = { template: e.template, net: e.net, size: e.size };
      const k = poolKeyString(key);
      const p = this.pools.get(k) ?? { key, target: 0, entry: e, warm: [], refilling: 0, golden: false, goldenBuilding: false, goldenRetryAt: 0 };
      p.entry = e;
      // warm_max adaptivity is not modelled: the target is the configured `warm`.
      p.target = e.warm;
      if (p.warm.length > p.target) p.warm.splice(0, p.warm.length - p.target); // trim the oldest first
      next.set(k, p);
    }
    this.pools.clear();
    for (const [k, p] of next) this.pools.set(k, p);
    this.refill();
  }

  /** Knob: set a key's warm stack to exactly n now (creating the pool, target n, golden, when new). */
  setWarm(key: PoolKey, n: number): void {
    const k = poolKeyString(key);
    let p = this.pools.get(k);
    if (!p) {
      p = { key, target: n, entry: { ...key, warm: n }, warm: [], refilling: 0, golden: true, goldenBuilding: false, goldenRetryAt: 0 };
      this.pools.set(k, p);
    }
    p.golden = true;
    if (p.warm.length > n) p.warm.splice(0, p.warm.length - n);
    while (p.warm.length < n) p.warm.push(this.mint());
  }

  setGolden(key: PoolKey, golden: boolean): void {
    const p = this.get(key);
    if (p) p.golden = golden;
  }

  provisionFails(key: PoolKey, fails: boolean): void {
    if (fails) this.failing.add(poolKeyString(key));
    else this.failing.delete(poolKeyString(key));
  }
  fails(key: PoolKey): boolean {
    return this.failing.has(poolKeyString(key));
  }

  /** Pop the newest warm VM of the key, if any (never while draining). */
  pop(key: PoolKey): WarmVm | undefined {
    if (this.draining) return undefined;
    return this.get(key)?.warm.pop();
  }

  /** Cordon: unclaimed warm VMs destroyed, refill off. The pool set itself is untouched. */
  drain(): void {
    this.draining = true;
    for (const p of this.pools.values()) p.warm = [];
  }
  undrain(): void {
    this.draining = false;
    this.refill();
  }

  /** Restart: warm VMs are gone (they lived in the old process) and in-flight provisions are forgotten. */
  restart(): void {
    this.forgetBooting();
    this.draining = false;
    for (const p of this.pools.values()) p.warm = [];
  }

  mint(): WarmVm {
    return { id: this.o.ids.sandboxId(), token: this.o.ids.token(), bornAt: this.o.clock.now() };
  }

  /** One refill pass (the 2 s loop, and the kicks after claim / PUT / uncordon). */
  refill(): void {
    if (this.draining || this.atCapacityReason !== undefined) return;
    let budget = this.o.refillConcurrency - this.inFlight();
    for (const p of this.pools.values()) {
      if (budget <= 0) return;
      if (!p.golden) {
        if (!p.goldenBuilding && this.o.clock.now() >= p.goldenRetryAt && p.target > 0) {
          budget--;
          this.buildGolden(p);
        }
        continue;
      }
      const need = Math.min(budget, p.target - p.warm.length - p.refilling);
      for (let i = 0; i < need; i++) this.provision(p);
      if (need > 0) budget -= need;
    }
  }

  private inFlight(): number {
    let n = 0;
    for (const p of this.pools.values()) n += p.refilling + (p.goldenBuilding ? 1 : 0);
    return n;
  }

  /** False once a PUT retired the pool while it was booting. */
  private live(p: Pool): boolean {
    return this.pools.get(poolKeyString(p.key)) === p;
  }

  /** Runs `done` after the provision latency, tracked so stop() can cancel it. */
  private boot(done: () => void): void {
    let timer: Timer | undefined;
    let fired = false;
    timer = this.o.clock.after(this.provisionLatencyMs, () => {
      fired = true; // a fake clock runs a zero-latency boot inside after(), before `timer` is assigned
      if (timer) this.booting.delete(timer);
      done();
    });
    if (!fired) this.booting.add(timer);
  }

  private buildGolden(p: Pool): void {
    p.goldenBuilding = true;
    this.boot(() => {
      if (!this.live(p)) return;
      p.goldenBuilding = false;
      if (this.fails(p.key)) {
        p.goldenRetryAt = this.o.clock.now() + GOLDEN_RETRY_MS;
        return;
      }
      p.golden = true;
      this.refill();
    });
  }

  private provision(p: Pool): void {
    p.refilling++;
    this.boot(() => {
      if (!this.live(p)) return;
      p.refilling--;
      if (this.fails(p.key) || this.draining) return;
      // A target lowered while this VM booted: it is destroyed rather than parked above the watermark.
      if (p.warm.length >= p.target) return;
      p.warm.push(this.mint());
    });
  }

  status(): PoolStatus[] {
    return this.all().map((p) => ({
      key: { ...p.key },
      warm: this.draining ? 0 : p.warm.length,
      refilling: p.refilling,
      // While draining the configured target is reported (sandboxd.md §9.5 leaves it open; the pool set is untouched).
      target: p.target,
      golden: p.golden,
    }));
  }
}
