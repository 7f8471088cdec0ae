// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// One sandbox's guest-side state: its directory, its processes, and what envd's /init set (access token, env
// vars, default user and working directory). Release, expiry and kill call destroy(): every process group is
// killed and the directory removed. Hibernate and wake call pause()/resume() (SIGSTOP / SIGCONT).
import { createHash } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import { GuestPaths } from "./paths.ts";
import { ProcessTable } from "./processes.ts";
import { FileMetadata } from "./metadata.ts";

export interface GuestSandboxOptions {
  id: string;
  /** The sandbox's directory; created (with home/user inside) if missing. */
  root: string;
  /** The claim's instance metadata (sandboxd `PUT …/instance-metadata`), read at /init time for a re-init. */
  instanceMetadata?: () => Record<string, unknown> | undefined;
}

export class GuestSandbox {
  readonly id: string;
  readonly paths: GuestPaths;
  readonly processes = new ProcessTable();
  /** User-defined file metadata (metadata.ts). */
  readonly metadata = new FileMetadata();
  /** The access token envd checks as X-Access-Token; unset until /init sets one (then every route but /health is checked). */
  accessToken: string | undefined;
  envVars: Record<string, string> = {};
  defaultUser = "user";
  /** Guest path commands start in when they name no cwd. */
  defaultWorkdir: string;
  private destroyed = false;
  private readonly instanceMetadata: () => Record<string, unknown> | undefined;

  constructor(o: GuestSandboxOptions) {
    this.id = o.id;
    this.paths = new GuestPaths(o.root);
    this.defaultWorkdir = "/home/user";
    this.instanceMetadata = o.instanceMetadata ?? (() => undefined);
    mkdirSync(this.paths.home, { recursive: true });
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

  /** The environment a command starts with: a minimal host base, then /init's env vars, then the request's. */
  env(extra: Record<string, string>, cwdHost: string): Record<string, string> {
    const base: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      HOME: this.paths.home,
      USER: this.defaultUser,
      LOGNAME: this.defaultUser,
      SHELL: "/bin/bash",
      LANG: process.env.LANG ?? "C.UTF-8",
      PWD: cwdHost,
      E2B_SANDBOX: "true",
      E2B_SANDBOX_ID: this.id,
    };
    return { ...base, ...this.envVars, ...extra };
  }

  pause(): void {
    this.processes.pauseAll();
  }
  resume(): void {
    this.processes.resumeAll();
  }

  /** Kill every process and remove the directory. Idempotent. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.processes.killAll();
    rmSync(this.paths.root, { recursive: true, force: true });
  }
}
