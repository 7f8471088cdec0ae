// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// The node side of the guests: one guest agent per live claim, kept in step with the claim table.
// sync() is called after every request the node serves, every reap tick and every out-of-band knob; it
//   - starts a guest for each claim that has none (a fork child starts as a copy of its parent's files and
//     access token, like a VM clone; the e2b surface then re-inits it with its own token; a checkpoint claim
//     starts as a copy of the files the source had when the checkpoint was taken),
//   - captures a copy of the source's files for each new checkpoint and promoted template (a template with its
//     envd defaults; a claim of it starts from that copy), and drops the copy of a deleted one,
//   - pauses (SIGSTOP) the processes of hibernated/archived/failed claims and resumes (SIGCONT) running ones,
//   - destroys the guest of every claim that left the table (release, expiry, vanish): all processes killed, the
//     directory removed.
// Where the host allows it (isolation.ts) each guest is a namespaced sandbox (namespace.ts, layer.ts): copies are
// of its layer, pause is the freezer cgroup, destroy kills its PID namespace. Otherwise a process sandbox.
// All sandbox directories live under one temporary base directory per node, removed by stop(). A simulator that
// exits without stop() (process.exit, an uncaught error) still kills every sandbox's processes on its way out;
// one killed by SIGKILL cannot: the next GuestHost on the same parent directory removes what it left (reap.ts).
import { cpSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { hostIsolation, type Isolation } from "./isolation.ts";
import { simLog } from "../log.ts";
import { Captures } from "./captures.ts";
import { copyLayer, ensureWorkDirs, nameLayer, prepareLayer, removeTree } from "./layer.ts";
import { Namespace } from "./namespace.ts";
import { BASE_PREFIX, markOwner, reapDead } from "./reap.ts";
import { type Clock, realClock } from "#shared/clock/index.ts";
import type { Claim } from "../claims.ts";
import { GuestSandbox } from "./sandbox.ts";
import { startGuestServer, type GuestServer } from "./server.ts";
import { CODE_INTERPRETER_PORT, codeInterpreterTarget } from "./code-interpreter.ts";

/** The guest port envd listens on; the ports relay maps it to the guest agent. */
export const ENVD_PORT = 49983;

interface Guest {
  sb: GuestSandbox;
  /** The sandbox's host directory (a namespaced sandbox's layer lives in it: layer.ts). */
  dir: string;
  server: GuestServer;
  paused: boolean;
}

export interface GuestHostOptions {
  /** Parent of the per-node base directory (default the OS temp dir). */
  dir?: string;
  /** Host the guest agents listen on (default 127.0.0.1). */
  host?: string;
  /** The node's clock: judges signed-URL expiry in every guest (default the real clock). */
  clock?: Clock;
  /** "auto" (default): namespaced sandboxes where the host allows them; "process": always the process sandbox. */
  isolation?: "auto" | "process";
  /** false: namespaced sandboxes get no freezer cgroup and hibernate with SIGSTOP (as on a host without one). */
  freezer?: boolean;
}

export class GuestHost {
  readonly baseDir: string;
  private readonly guests = new Map<string, Guest>();
  /** Checkpoints ("ck:<id>") and promoted templates ("tpl:<digest>"): copies of their source (captures.ts). */
  private readonly captures: Captures;
  private readonly host: string;
  private readonly clock: Clock;
  /** What kind of sandbox this node's guests are (isolation.ts). */
  readonly isolation: Isolation;
  /** Destroys still in flight (a namespaced sandbox waits for its last process before removing its files). */
  private readonly dying = new Set<Promise<void>>();
  private readonly useFreezer: boolean;
  /** Claims whose guest could not be created (said once, not retried). */
  private readonly failed = new Set<string>();

  private readonly onExit = () => {
    for (const g of this.guests.values()) g.sb.killNow();
  };

  constructor(o: GuestHostOptions = {}) {
    const parent = o.dir ?? tmpdir();
    mkdirSync(parent, { recursive: true });
    // A simulator killed with SIGKILL on this directory left sandboxes running: remove them first (reap.ts).
    const reaped = reapDead(parent);
    if (reaped.length) simLog().warn({ removed: reaped }, "removed the sandboxes of simulators that died without stopping");
    this.baseDir = mkdtempSync(join(parent, BASE_PREFIX));
    markOwner(this.baseDir);
    this.captures = new Captures(this.baseDir);
    this.host = o.host ?? "127.0.0.1";
    this.clock = o.clock ?? realClock;
    this.useFreezer = o.freezer !== false;
    this.isolation = o.isolation === "process" ? { mode: "process", reason: "asked for (isolation: process)" } : hostIsolation();
    process.on("exit", this.onExit);
  }

  private get namespaced(): boolean {
    return this.isolation.mode === "namespaces";
  }
  private get rootless(): boolean {
    return this.isolation.mode === "namespaces" && this.isolation.rootless === true;
  }

  get size(): number {
    return this.guests.size;
  }

  /** The guest of a sandbox, if it has one. */
  get(id: string): GuestSandbox | undefined {
    return this.guests.get(id)?.sb;
  }

  /**
   * Where the relay sends a sandbox's guest port: envd's port goes to the guest agent; any other port to the
   * same port on the host, where the sandbox's processes listen (they share the host's network: README.md).
   */
  target(id: string, port: number): { host: string; port: number } | undefined {
    const g = this.guests.get(id);
    if (!g) return undefined;
    if (port === ENVD_PORT) return { host: this.host, port: g.server.port };
    if (port === CODE_INTERPRETER_PORT) return codeInterpreterTarget(g.sb, this.host); // code-interpreter.ts
    // A sandbox with its own network is reached on its own loopback, through the relay inside it.
    if (g.sb.ns?.ownNetwork) {
      g.sb.ns.ensureRelay().catch(() => {}); // the dial waits for its socket (http/relay.ts)
      return { host: `unix:${g.sb.ns.socketPath}`, port };
    }
    return { host: "127.0.0.1", port };
  }

  /**
   * Checkpoints and promoted templates: a new one captures its source as it stands now (a template also its
   * envd defaults); a deleted or replaced one drops its copy.
   */
  sync(claims: Iterable<Claim>, checkpoints: Iterable<{ id: string; sandboxId: string }> = [], templates: Iterable<{ contentDigest: string; sourceId?: string }> = []): void {
    const kept = new Set<string>();
    const capture = (key: string, sourceId: string | undefined, defaults: boolean) => {
      kept.add(key);
      const source = sourceId ? this.guests.get(sourceId) : undefined;
      if (!this.captures.has(key) && source) this.captures.take(key, source, { defaults });
    };
    for (const ck of checkpoints) capture(`ck:${ck.id}`, ck.sandboxId, false);
    for (const t of templates) capture(`tpl:${t.contentDigest}`, t.sourceId, true);
    this.captures.retain(kept);
    const live = new Set<string>();
    for (const c of claims) {
      live.add(c.id);
      let g = this.guests.get(c.id);
      if (!g) {
        if (this.failed.has(c.id)) continue;
        try {
          g = this.create(c);
        } catch (e) {
          // Said once; the claim stays without a guest (its envd answers nothing) rather than the simulator crashing.
          this.failed.add(c.id);
          removeTree(join(this.baseDir, c.id));
          simLog().warn({ sandbox: c.id, err: (e as Error).message }, "the sandbox's guest could not be created");
          continue;
        }
      }
      const pause = c.state !== "running";
      if (pause && !g.paused) g.sb.pause();
      if (!pause && g.paused) g.sb.resume();
      g.paused = pause;
    }
    for (const id of this.failed) if (!live.has(id)) this.failed.delete(id);
    for (const [id, g] of this.guests) {
      if (live.has(id)) continue;
      this.guests.delete(id);
      void g.server.stop();
      this.track(g.sb.destroy());
    }
  }

  private track(p: Promise<void>): void {
    this.dying.add(p);
    void p.finally(() => this.dying.delete(p));
  }

  private create(c: Claim): Guest {
    const dir = join(this.baseDir, c.id);
    const parent = c.forkedFrom ? this.guests.get(c.forkedFrom) : undefined;
    // A checkpoint claim starts from the checkpoint's copy; a promoted template's clone from the template's.
    const capture = c.fromCheckpoint ? this.captures.get(`ck:${c.fromCheckpoint}`) : c.templateDigest ? this.captures.get(`tpl:${c.templateDigest}`) : undefined;
    const from = parent ? { dir: parent.dir, metadata: parent.sb.metadata } : capture;
    let sb: GuestSandbox;
    if (this.namespaced) {
      if (from) {
        copyLayer(from.dir, dir);
        ensureWorkDirs(dir);
      } else prepareLayer(dir, { rootless: this.rootless });
      nameLayer(dir, c.id);
      const ns = new Namespace({ dir, hostname: c.id, ownNetwork: c.key.net !== "egress", cgroup: `${basename(this.baseDir)}-${c.id}`, freezer: this.useFreezer, rootless: this.rootless });
      sb = new GuestSandbox({ id: c.id, root: join(dir, "layer"), ns, rootless: this.rootless, instanceMetadata: () => c.instanceMetadata });
      // Its requests answer 503 with the reason; the log says it once.
      sb.ready.catch((e: Error) => {
        if (sb.alive) simLog().warn({ sandbox: c.id, err: e.message }, "namespaced sandbox did not start");
      });
    } else {
      if (from) cpSync(from.dir, dir, { recursive: true, verbatimSymlinks: true });
      sb = new GuestSandbox({ id: c.id, root: dir, instanceMetadata: () => c.instanceMetadata });
    }
    if (from) sb.metadata.copyFrom(from.metadata);
    if (capture?.defaults) {
      const { accessToken, envVars, defaultUser, defaultWorkdir, startCommands } = capture.defaults;
      Object.assign(sb, { accessToken, envVars: { ...envVars }, defaultUser, defaultWorkdir });
      // The template's start commands run again in the clone once it is up (captures.ts): the build's startCmd.
      void sb.ready.then(() => sb.runStartCommands(startCommands), () => {});
    }
    if (parent) {
      sb.accessToken = parent.sb.accessToken;
      sb.envVars = { ...parent.sb.envVars };
      sb.defaultUser = parent.sb.defaultUser;
      sb.defaultWorkdir = parent.sb.defaultWorkdir;
    }
    const g: Guest = { sb, dir, server: startGuestServer(sb, this.host, this.clock), paused: false };
    this.guests.set(c.id, g);
    return g;
  }

  /** Destroy every guest and remove the base directory. */
  async stop(): Promise<void> {
    process.off("exit", this.onExit);
    const all = [...this.guests.values()];
    this.guests.clear();
    for (const g of all) this.track(g.sb.destroy());
    await Promise.all([...all.map((g) => g.server.stop()), ...this.dying]);
    removeTree(this.baseDir);
  }
}
