// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// Copies of a sandbox taken for later claims: a checkpoint's (files and file metadata as they were), and a
// promoted template's (the same plus what envd's /init set: default user, working directory, env vars and the
// access token, so a clone starts as the build left it, and answers no request without that token: as a VM
// snapshot keeps envd's memory; whoever claims the clone hands it its own token through instance metadata) and its start commands: the commands still running at promote time (a build's
// `startCmd` in the background), which a clone runs again once it is up, standing in for the memory a VM snapshot
// would keep (docs/decisions.md, "sandboxd-sim: a promoted template's start command"). A namespaced sandbox's copy
// is its layer (layer.ts copyLayer); a process sandbox's, its directory. No memory: processes are not part of a copy.
import { cpSync, rmSync } from "node:fs";
import { join } from "node:path";
import { copyLayer } from "./layer.ts";
import { FileMetadata } from "./metadata.ts";
import type { ProcessConfig } from "./processes.ts";
import type { GuestSandbox } from "./sandbox.ts";

/** At most this many running commands are kept as a template's start commands (a guest may start any number). */
export const MAX_START_COMMANDS = 8;

/** A command a clone runs at start, as the source ran it: same command line, cwd, request env, user and tag. */
export interface StartCommand {
  config: ProcessConfig;
  user?: string;
  tag?: string;
}

export interface EnvdDefaults {
  /** The access token envd held at promote time (undefined: it had none, and the clone checks nothing either). */
  accessToken: string | undefined;
  envVars: Record<string, string>;
  defaultUser: string;
  defaultWorkdir: string;
  /** The commands still running when the template was promoted (oldest first), re-run by every clone. */
  startCommands: StartCommand[];
}

export interface Capture {
  dir: string;
  metadata: FileMetadata;
  defaults?: EnvdDefaults;
}

export class Captures {
  private readonly byKey = new Map<string, Capture>();

  constructor(private readonly baseDir: string) {}

  get(key: string): Capture | undefined {
    return this.byKey.get(key);
  }
  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /** Copy `source` (its host directory `dir`) under `key`; with `defaults`, its envd /init state too. */
  take(key: string, source: { dir: string; sb: GuestSandbox }, o: { defaults: boolean }): void {
    const dir = join(this.baseDir, "captures", key.replace(/[^A-Za-z0-9_.-]/g, "_"));
    rmSync(dir, { recursive: true, force: true });
    if (source.sb.ns) copyLayer(source.dir, dir);
    else cpSync(source.sb.paths.root, dir, { recursive: true, verbatimSymlinks: true });
    const metadata = new FileMetadata();
    metadata.copyFrom(source.sb.metadata);
    const sb = source.sb;
    const defaults = o.defaults ? { accessToken: sb.accessToken, envVars: { ...sb.envVars }, defaultUser: sb.defaultUser, defaultWorkdir: sb.defaultWorkdir, startCommands: runningCommands(sb) } : undefined;
    this.byKey.set(key, { dir, metadata, defaults });
  }

  /** Drop every capture whose key is not in `keep` (a deleted checkpoint, a replaced or deleted template). */
  retain(keep: Set<string>): void {
    for (const [key, c] of this.byKey) {
      if (keep.has(key)) continue;
      rmSync(c.dir, { recursive: true, force: true });
      this.byKey.delete(key);
    }
  }
}

/** The source's commands still running (no terminals: a pty session is someone's shell, not a service), oldest first. */
function runningCommands(sb: GuestSandbox): StartCommand[] {
  return sb.processes
    .list()
    .filter((p) => !p.pty && !p.ended)
    .sort((a, b) => a.startedAt - b.startedAt)
    .slice(0, MAX_START_COMMANDS)
    .map((p) => ({ config: { cmd: p.config.cmd, args: [...p.config.args], envs: { ...p.config.envs }, cwd: p.config.cwd }, user: p.user, tag: p.tag }));
}
