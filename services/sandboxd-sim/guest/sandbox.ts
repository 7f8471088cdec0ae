// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// One sandbox's guest-side state: its files, its processes, and what envd's /init set (access token, env vars,
// default user and working directory). Two kinds (isolation.ts): a namespaced sandbox (namespace.ts) runs its
// commands inside its own namespaces and overlay root, as the user they name; a process sandbox runs them as host
// child processes in its directory. Release, expiry and kill call destroy(): every process killed and the
// directory removed. Hibernate and wake call pause()/resume() (the freezer cgroup, else SIGSTOP / SIGCONT).
import { createHash } from "node:crypto";
import { chownSync, mkdirSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { GuestPaths, PathError } from "./paths.ts";
import { NotRegularFile, readSmallFile } from "./small-file.ts";
import { ProcessRefused, ProcessTable, type SpawnOptions } from "./processes.ts";
import { FileMetadata } from "./metadata.ts";
import { NamespaceEnded, type Namespace } from "./namespace.ts";
import type { StartCommand } from "./captures.ts";
import { simLog } from "../log.ts";

export interface GuestSandboxOptions {
  id: string;
  /** The sandbox's directory (a process sandbox's "/", created with home/user inside if missing). */
  root: string;
  /** The claim's instance metadata (sandboxd `PUT …/instance-metadata`), read at /init time for a re-init. */
  instanceMetadata?: () => Record<string, unknown> | undefined;
  /** A namespaced sandbox: its namespaces and overlay root; the files are then reached through them. */
  ns?: Namespace;
  /** Rootless namespaces (isolation.ts): one uid inside, so every user's commands run as uid 0 there. */
  rootless?: boolean;
}

export interface GuestUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

const STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export class GuestSandbox {
  readonly id: string;
  readonly paths: GuestPaths;
  readonly processes: ProcessTable;
  /** User-defined file metadata (metadata.ts). */
  readonly metadata = new FileMetadata();
  readonly ns: Namespace | undefined;
  /** Settles once the sandbox can run commands and serve files (a namespaced one has to start first). */
  readonly ready: Promise<void>;
  /** The access token envd checks as X-Access-Token; unset until /init sets one (then every route but /health is checked). */
  accessToken: string | undefined;
  envVars: Record<string, string> = {};
  defaultUser = "user";
  /** Guest path commands start in when they name no cwd. */
  defaultWorkdir: string;
  private destroyed = false;
  private readonly rootless: boolean;
  private readonly instanceMetadata: () => Record<string, unknown> | undefined;

  constructor(o: GuestSandboxOptions) {
    this.id = o.id;
    this.paths = new GuestPaths(o.root);
    this.defaultWorkdir = "/home/user";
    this.instanceMetadata = o.instanceMetadata ?? (() => undefined);
    this.ns = o.ns;
    this.rootless = o.rootless === true;
    const ns = o.ns;
    this.processes = new ProcessTable(ns ? (argv, cwd, who) => enter(ns, argv, cwd, who) : undefined);
    if (ns) {
      // Files are reached through PID 1's root: the overlay as the sandbox sees it, symlinks resolved inside it.
      this.ready = ns.ready.then(() => {
        this.paths.root = ns.rootPath;
        this.paths.kernelProc = true;
        // /proc/<pid 1>/root is the sandbox's only while PID 1 is: never a host process's that got its number.
        this.paths.check = () => {
          if (!ns.alive()) throw new PathError(`sandbox ${this.id} ended: its init process is gone; release it`);
        };
      });
      this.ready.catch(() => {});
    } else {
      mkdirSync(this.paths.home, { recursive: true });
      this.ready = Promise.resolve();
    }
  }

  get alive(): boolean {
    return !this.destroyed;
  }

  /**
   * May this /init replace the current access token? Like envd: the first init sets it; later ones must present
   * the current token (header or body), or a new token whose SHA-512 the node's instance metadata carries as
   * `accessTokenHash` (how a fork child, a clone holding its parent's token, is handed its own).
   */
  mayReinit(headerToken: string | undefined, bodyToken: string | undefined): boolean {
    if (this.accessToken === undefined) return true;
    if (headerToken === this.accessToken || bodyToken === this.accessToken) return true;
    const hash = this.instanceMetadata()?.accessTokenHash;
    return typeof hash === "string" && bodyToken !== undefined && createHash("sha512").update(bodyToken).digest("hex") === hash.toLowerCase();
  }

  /**
   * A user of a namespaced sandbox, from its own /etc/passwd (so one `useradd` created counts); undefined for
   * a process sandbox, where everything runs as the simulator's user. An unknown name is refused.
   */
  user(name: string | undefined): GuestUser | undefined {
    if (!this.ns) return undefined;
    const want = name && name !== "" ? name : this.defaultUser;
    let passwd: string;
    try {
      passwd = readSmallFile(this.paths.toHost("/etc/passwd"));
    } catch (e) {
      // Root inside may have made it a FIFO or a link to a device: refused, never waited on (small-file.ts).
      if (e instanceof NotRegularFile) throw new ProcessRefused(`the sandbox's /etc/passwd is not a regular file: no user ${JSON.stringify(want)}`);
      throw e;
    }
    for (const line of passwd.split("\n")) {
      const f = line.split(":");
      // Rootless: the user's name and home, but the namespace's one uid (root inside).
      if (f[0] === want && f.length >= 7) return { name: want, uid: this.rootless ? 0 : Number(f[2]), gid: this.rootless ? 0 : Number(f[3]), home: f[5] || "/" };
    }
    throw new ProcessRefused(`user ${JSON.stringify(want)} does not exist in the sandbox`);
  }

  /**
   * How a command starts: its host directory (checked by the process table), and for a namespaced sandbox the
   * guest directory and identity inside. The environment: a minimal base, then /init's env vars, then the request's.
   */
  launch(cwd: string | undefined, userName: string | undefined, extra: Record<string, string>): Pick<SpawnOptions, "cwdHost" | "env" | "inside"> {
    const guestCwd = cwd ?? this.defaultWorkdir;
    const cwdHost = this.paths.toHost(guestCwd);
    const who = this.user(userName);
    const name = who?.name ?? this.defaultUser;
    const base: Record<string, string> = {
      PATH: who ? STD_PATH : (process.env.PATH ?? STD_PATH),
      HOME: who ? who.home : this.paths.home,
      USER: name,
      LOGNAME: name,
      SHELL: "/bin/bash",
      LANG: process.env.LANG ?? "C.UTF-8",
      PWD: who ? this.paths.toGuest(cwdHost) : cwdHost,
      E2B_SANDBOX: "true",
      E2B_SANDBOX_ID: this.id,
    };
    const env = { ...base, ...this.envVars, ...extra };
    return who ? { cwdHost, env, inside: { cwd: this.paths.toGuest(cwdHost), uid: who.uid, gid: who.gid } } : { cwdHost, env };
  }

  /**
   * Create a directory (and its missing parents) owned by the user a files request acts as, as envd does: a
   * file the SDK writes as `user` is `user`'s to change in a command. A process sandbox only creates it.
   */
  makeDirs(host: string, userName: string | undefined): void {
    const first = mkdirSync(host, { recursive: true });
    if (first !== undefined) this.chownUp(host, first, userName);
  }

  /** Give a file just written (and the directories made for it, from `upTo`) to the request's user. */
  chownUp(host: string, upTo: string, userName: string | undefined): void {
    // Rootless: what the simulator writes is already the namespace's one uid, and it may not chown.
    const who = this.ns && !this.rootless ? this.user(userName) : undefined;
    if (!who) return;
    for (let p = host; ; p = dirname(p)) {
      chownSync(p, who.uid, who.gid);
      if (p === upTo || p.length <= upTo.length) break;
    }
  }

  /**
   * A promoted template's clone: run the commands its source had running at promote time (its start command),
   * each as the user and in the directory it was started with, over the clone's own env (/init's, then its own).
   * One that cannot start is logged and skipped: the clone is still handed out, as a VM whose service crashed.
   */
  async runStartCommands(cmds: StartCommand[]): Promise<void> {
    for (const c of cmds) {
      if (this.destroyed) return;
      try {
        await this.processes.start(c.config, { tag: c.tag, user: c.user, stdin: false, ...this.launch(c.config.cwd || undefined, c.user, c.config.envs) }, () => {});
      } catch (e) {
        simLog().warn({ sandbox: this.id, cmd: c.config.cmd, err: (e as Error).message }, "a promoted template's start command did not start in its clone");
      }
    }
  }

  pause(): void {
    if (this.ns) this.ns.pause();
    else this.processes.pauseAll();
  }
  resume(): void {
    if (this.ns) this.ns.resume();
    else this.processes.resumeAll();
  }

  /** Kill every process and remove the directory (a namespaced sandbox: once its last process is gone). Idempotent. */
  destroy(): Promise<void> {
    if (this.destroyed) return this.ns?.destroy() ?? Promise.resolve();
    this.destroyed = true;
    this.processes.killAll();
    if (this.ns) return this.ns.destroy();
    rmSync(this.paths.root, { recursive: true, force: true });
    return Promise.resolve();
  }

  /** The process-exit path: kill what can be killed synchronously. */
  killNow(): void {
    this.processes.killAll();
    this.ns?.killNow();
  }
}

/** The command line entering a namespaced sandbox; one whose PID 1 is gone refuses it as a process that cannot start. */
function enter(ns: Namespace, ...a: Parameters<Namespace["command"]>): ReturnType<Namespace["command"]> {
  try {
    return ns.command(...a);
  } catch (e) {
    if (e instanceof NamespaceEnded) throw new ProcessRefused(e.message);
    throw e;
  }
}
