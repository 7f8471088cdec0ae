// The sandboxd doubles behind the provider tests: a hand-written stub of the three consumer interfaces, and
// the real SandboxdClient against the in-process simulator. Both offer the same knobs (SandboxdDouble), so
// every provider test runs against either; the simulator is the default.
import type { ClaimReply, ClaimRequest, SandboxDetail, SandboxRow } from "#shared/sandboxd/schemas.ts";
import { toWireTime } from "#shared/sandboxd/schemas.ts";
import { SandboxdCapacity, SandboxdForbidden, SandboxdNotFound, SandboxdServerError, SandboxdTransport } from "#shared/sandboxd/errors.ts";
import { type ClaimOptions, SandboxdClient } from "#shared/sandboxd/client.ts";
import type { FakeClock } from "#shared/clock/index.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import type { Clock } from "#shared/clock/index.ts";
import type { SandboxClaimer, SandboxLister, SandboxReader, SandboxReleaser } from "#services/vk-sandbox/provider/types.ts";

/** A counter a test can await: `await c.until(3)`. */
export class Counter {
  n = 0;
  private waiters: Array<{ n: number; resolve: () => void }> = [];
  inc(): void {
    this.n++;
    this.waiters = this.waiters.filter((w) => (w.n <= this.n ? (w.resolve(), false) : true));
  }
  until(n: number): Promise<void> {
    if (this.n >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }
}

/** A promise a test opens by hand. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

const ctx = { node: "stub", route: "stub" };
export const capacityError = () => new SandboxdCapacity("node claim quota reached", { ...ctx, status: 429 });
export const serverError = (msg = "release failed") => new SandboxdServerError(msg, { ...ctx, status: 500 }, { serverMessage: msg });
export const listError = () => new SandboxdTransport("connect ECONNREFUSED", ctx, { delivered: "no" });

interface StubRow {
  id: string;
  token: string;
  deadline: number;
  claimRef?: string;
  template: string;
  claimedAt: number;
  metadata?: Record<string, string>;
}

/**
 * sandboxd as the provider sees it. Knobs fail one slice at a time; `rows` is the node's claim table.
 * Release follows the wire: the claim's own token or 404 (already-gone).
 */
export class StubSandboxd implements SandboxClaimer, SandboxReleaser, SandboxLister, SandboxReader {
  readonly rows = new Map<string, StubRow>();
  readonly claimCalls = new Counter();
  readonly releaseCalls = new Counter();
  readonly listCalls = new Counter();
  readonly getCalls = new Counter();
  readonly claimRequests: ClaimRequest[] = [];
  readonly released: string[] = [];
  /** While false, reads by id answer 403 (a caller without the root token). */
  private rootReads = true;
  /** Fail every read by id with a 500 while set. */
  private readFault = false;
  /** Each claim takes the next failure from this queue while it is non-empty. */
  claimFailures: Array<() => Error> = [];
  /** Fail every release with this while set. */
  releaseFails: (() => Error) | undefined;
  /** Fail every listing while set. */
  listFails = false;
  /** Claims wait on this while set (to hold many creates in flight). */
  claimGate: Promise<void> | undefined;
  releaseGate: Promise<void> | undefined;
  /** Hook run inside release before it answers (lets a test inspect the disk at that moment). */
  onRelease: ((id: string) => void) | undefined;
  private next = 0;

  constructor(readonly clock: Clock, readonly address = "10.0.0.5:7777") {}

  async claim(req: ClaimRequest): Promise<ClaimReply> {
    this.claimCalls.inc();
    this.claimRequests.push(req);
    if (this.claimGate) await this.claimGate;
    const fail = this.claimFailures.shift();
    if (fail) throw fail();
    const id = `sb_${(this.next++).toString(16).padStart(16, "0")}`;
    const token = `${id.slice(3)}${"0".repeat(16)}`;
    const ttl = req.ttl_seconds && req.ttl_seconds > 0 ? Math.min(req.ttl_seconds, 86_400) : 300;
    const deadline = this.clock.now() + ttl * 1000;
    this.rows.set(id, { id, token, deadline, claimRef: req.claim_ref, template: req.template, claimedAt: this.clock.now(), metadata: req.metadata });
    return { id, token, deadline: toWireTime(deadline), owner_addr: this.address, net_route: "none" };
  }

  async release(id: string, opts: { token: string }): Promise<"released" | "already-gone"> {
    this.releaseCalls.inc();
    this.onRelease?.(id);
    if (this.releaseGate) await this.releaseGate;
    if (this.releaseFails) throw this.releaseFails();
    const row = this.rows.get(id);
    if (!row || row.token !== opts.token) return "already-gone";
    this.rows.delete(id);
    this.released.push(id);
    return "released";
  }

  async list(): Promise<SandboxRow[]> {
    this.listCalls.inc();
    if (this.listFails) throw listError();
    return [...this.rows.values()].map((r) => this.row(r));
  }

  private row(r: StubRow): SandboxRow {
    return {
      id: r.id,
      key: { template: r.template, net: "none", size: "small" },
      deadline: toWireTime(r.deadline),
      hibernated: false,
      claimed_at: toWireTime(r.claimedAt),
      ...(r.claimRef ? { claim_ref: r.claimRef } : {}),
      ...(r.metadata && Object.keys(r.metadata).length ? { metadata: { ...r.metadata } } : {}),
    };
  }

  async get(id: string): Promise<SandboxDetail> {
    this.getCalls.inc();
    if (!this.rootReads) throw new SandboxdForbidden("forbidden", { ...ctx, status: 403 });
    if (this.readFault) throw serverError("read failed");
    const r = this.rows.get(id);
    if (!r) throw new SandboxdNotFound("unknown sandbox", { ...ctx, status: 404 });
    return { ...this.row(r), token: r.token };
  }

  async info(): Promise<{ advertise_addr: string }> {
    if (!this.rootReads) throw new SandboxdForbidden("forbidden", { ...ctx, status: 403 });
    return { advertise_addr: this.address };
  }

  /** Reads by id stop showing tokens (403): a setup without the root token. */
  withoutRootToken(): void {
    this.rootReads = false;
  }

  failReads(on: boolean): void {
    this.readFault = on;
  }

  /** A claim as vk-sandbox makes it, delivered by sandboxd, its reply never recorded by us (a crash). */
  async claimUnrecorded(req: ClaimRequest): Promise<ClaimReply> {
    return this.claim(req);
  }

  /** An out-of-band claim (another control plane's, or an orphan). */
  async addForeign(claimRef?: string): Promise<string> {
    const id = `sb_f${(this.next++).toString(16).padStart(15, "0")}`;
    this.rows.set(id, { id, token: "f".repeat(32), deadline: this.clock.now() + 3600_000, claimRef, template: "t", claimedAt: this.clock.now() });
    return id;
  }

  ids(): string[] {
    return [...this.rows.keys()];
  }
  has(id: string): boolean {
    return this.rows.has(id);
  }
  vanish(id: string): void {
    this.rows.delete(id);
  }
  vanishAll(): void {
    this.rows.clear();
  }
  setDeadline(id: string, ms: number): void {
    this.rows.get(id)!.deadline = ms;
  }
  failNextClaim(): void {
    this.claimFailures.push(capacityError);
  }
  failReleases(on: boolean): void {
    this.releaseFails = on ? () => serverError() : undefined;
  }
  failLists(on: boolean): void {
    this.listFails = on;
  }
  holdClaims(): () => void {
    const g = gate();
    this.claimGate = g.promise;
    return () => {
      this.claimGate = undefined;
      g.open();
    };
  }
  /** Releases never answer (a hung node). */
  holdReleases(): void {
    this.releaseGate = new Promise(() => {});
  }
  async close(): Promise<void> {}
}

/** The knobs every sandboxd double offers; tests use only these. */
export type SandboxdDouble = Pick<
  StubSandboxd,
  | "claim"
  | "release"
  | "list"
  | "get"
  | "info"
  | "getCalls"
  | "withoutRootToken"
  | "failReads"
  | "claimUnrecorded"
  | "claimCalls"
  | "releaseCalls"
  | "listCalls"
  | "claimRequests"
  | "released"
  | "onRelease"
  | "addForeign"
  | "ids"
  | "has"
  | "vanish"
  | "vanishAll"
  | "setDeadline"
  | "failNextClaim"
  | "failReleases"
  | "failLists"
  | "holdClaims"
  | "holdReleases"
  | "close"
>;

export const ROOT_TOKEN = "root-token-for-tests";

/**
 * The real sandboxd client against the in-process simulator, counted. The node advertises 10.0.0.5:7777 so
 * the Pod IP is predictable; its clock is the test's.
 */
export class SimSandboxd implements SandboxdDouble {
  readonly claimCalls = new Counter();
  readonly releaseCalls = new Counter();
  readonly listCalls = new Counter();
  readonly getCalls = new Counter();
  readonly claimRequests: ClaimRequest[] = [];
  readonly released: string[] = [];
  onRelease: ((id: string) => void) | undefined;
  private gateP: Promise<void> | undefined;
  private releaseFault = false;
  private listFault = false;
  private readFault = false;

  private constructor(
    readonly sim: SandboxdSim,
    readonly client: SandboxdClient,
  ) {}

  static async start(clock: FakeClock): Promise<SimSandboxd> {
    const sim = await startSandboxdSim({ clock, seed: 1, rootToken: ROOT_TOKEN, advertiseAddr: "10.0.0.5:7777", egressAttachment: true });
    // One attempt: retries are the provider's and the controller's business, and counts stay exact.
    const client = new SandboxdClient({ baseUrl: sim.url, token: ROOT_TOKEN, retry: { attempts: 1 } });
    return new SimSandboxd(sim, client);
  }

  /** Forwards the provider's options as given: what the provider asks of the real client is under test. */
  async claim(req: ClaimRequest, opts?: ClaimOptions): Promise<ClaimReply> {
    this.claimCalls.inc();
    this.claimRequests.push(req);
    if (this.gateP) await this.gateP;
    return this.client.claim(req, opts);
  }

  async release(id: string, opts: { token: string }): Promise<"released" | "already-gone"> {
    this.releaseCalls.inc();
    this.onRelease?.(id);
    const r = await this.client.release(id, { token: opts.token });
    if (r === "released") this.released.push(id);
    return r;
  }

  async list(): Promise<SandboxRow[]> {
    this.listCalls.inc();
    return this.client.list();
  }

  async get(id: string): Promise<SandboxDetail> {
    this.getCalls.inc();
    return this.client.get(id);
  }

  info(): Promise<{ advertise_addr: string }> {
    return this.client.info();
  }

  /** An open node: no Authorization is checked and reads by id never carry the token. */
  withoutRootToken(): void {
    this.sim.setTokens(null);
  }

  /** A claim as vk-sandbox makes it, delivered by sandboxd, its reply never recorded by us (a crash). */
  claimUnrecorded(req: ClaimRequest): Promise<ClaimReply> {
    return this.client.claim(req, { reconcile: false });
  }

  async addForeign(claimRef?: string): Promise<string> {
    const r = await this.client.claim({ template: "other", ...(claimRef ? { claim_ref: claimRef } : {}) }, { reconcile: false });
    return r.id;
  }
  ids(): string[] {
    return this.sim.claims().map((c) => c.id);
  }
  has(id: string): boolean {
    return this.ids().includes(id);
  }
  vanish(id: string): void {
    this.sim.vanish(id);
  }
  vanishAll(): void {
    for (const id of this.ids()) this.sim.vanish(id);
  }
  setDeadline(id: string, ms: number): void {
    const c = this.sim.node.table.get(id);
    if (!c) throw new Error(`no claim ${id}`);
    c.deadline = ms;
  }
  failNextClaim(): void {
    this.sim.fail("claim", 429, { error: "node claim quota reached: 1 live claims, cap 1" });
  }
  failReleases(on: boolean): void {
    this.releaseFault = on;
    this.applyFaults();
  }
  failLists(on: boolean): void {
    this.listFault = on;
    this.applyFaults();
  }
  failReads(on: boolean): void {
    this.readFault = on;
    this.applyFaults();
  }
  private applyFaults(): void {
    this.sim.clearFaults();
    if (this.readFault) this.sim.fail("get", 500, { error: "read failed" }, Number.POSITIVE_INFINITY);
    if (this.releaseFault) this.sim.fail("release", 500, { error: "release failed" }, Number.POSITIVE_INFINITY);
    if (this.listFault) this.sim.listFails("500");
  }
  holdClaims(): () => void {
    const g = gate();
    this.gateP = g.promise;
    return () => {
      this.gateP = undefined;
      g.open();
    };
  }
  holdReleases(): void {
    this.sim.hang("release", Number.POSITIVE_INFINITY);
  }
  close(): Promise<void> {
    return this.sim.stop();
  }
}

const open: SandboxdDouble[] = [];

/**
 * The sandboxd double for a test: the simulator by default, the hand-written stub with
 * VK_PROVIDER_SANDBOXD=stub (both satisfy the same knobs, so every test runs against either).
 */
export async function makeSandboxd(clock: FakeClock): Promise<SandboxdDouble> {
  const d = process.env.VK_PROVIDER_SANDBOXD === "stub" ? new StubSandboxd(clock) : await SimSandboxd.start(clock);
  open.push(d);
  return d;
}

/** Stop every double a test started (call from afterEach). */
export async function closeSandboxds(): Promise<void> {
  await Promise.all(open.splice(0).map((d) => d.close()));
}

