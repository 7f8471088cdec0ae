// One build's steps inside its sandbox (docs/e2b.md §6.2), every one through envd's process and files API. The
// state a Dockerfile carries between steps (user, workdir, env) lives here and is handed to each command; RUN is
// `/bin/bash -l -c <cmd>`, the rest are small root scripts whose inputs travel as environment variables (never
// spliced into the script text).
import { randomBytes } from "node:crypto";
import { E2bError } from "../errors.ts";
import type { UploadStore } from "../uploads/index.ts";
import { type BuildTarget, EnvdCallError, LineSplitter, captureOutput, startProcess, uploadFile } from "./envd-client.ts";
import { EnvExpansionError, expandEnv, parseEnvBlock } from "./env-expand.ts";
import type { BuildStep } from "./steps.ts";

export interface GuestState {
  user: string;
  workdir: string;
  env: Record<string, string>;
}

export interface StepContext {
  target: BuildTarget;
  state: GuestState;
  store: UploadStore | undefined;
  ns: string;
  name: string;
  signal: AbortSignal;
  /** ms left before the build's deadline. */
  remainingMs(): number;
  log(level: "info" | "warn" | "error", message: string): void;
  /** False once the log drops output lines: a command's output is then not decoded (envd-client.ts). */
  wantsOutput(): boolean;
}

/** A step failed; the message is the tenant's to read (no node or address in it). */
export class StepFailed extends Error {}

/** An ENV value is at most this long once expanded; the guest's base environment read for it at most this too. */
const MAX_ENV_VALUE = 64 * 1024;
/**
 * The environment of root helper scripts (WORKDIR, USER, COPY): fixed, never the tenant's ENV, so a BASH_ENV,
 * PATH, LD_PRELOAD or SHELLOPTS set by a step cannot change what they run.
 */
const ROOT_ENV: Readonly<Record<string, string>> = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME: "/root", LANG: "C" };

const posixJoin = (dir: string, p: string) => (p.startsWith("/") ? p : `${dir.replace(/\/+$/, "")}/${p}`);

export async function runStep(c: StepContext, step: BuildStep): Promise<void> {
  switch (step.type) {
    case "RUN":
      return runCommand(c, step.cmd, step.user ?? c.state.user);
    case "ENV": {
      let base: Record<string, string> | undefined;
      for (const [k, v] of step.env) {
        if (v.includes("$") && !base) base = await guestBaseEnv(c);
        c.state.env[k] = expandValue({ ...base, ...c.state.env }, v);
      }
      c.log("info", `ENV ${step.env.map(([k]) => k).join(" ")}`);
      return;
    }
    case "WORKDIR": {
      const dir = posixJoin(c.state.workdir, step.dir);
      await rootScript(c, 'mkdir -p -- "$E2B_DIR" && chown -- "$E2B_OWNER" "$E2B_DIR"', { E2B_DIR: dir, E2B_OWNER: c.state.user });
      c.state.workdir = dir;
      c.log("info", `WORKDIR ${dir}`);
      return;
    }
    case "USER":
      await rootScript(c, 'id -u -- "$E2B_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash -- "$E2B_USER"', { E2B_USER: step.user });
      c.state.user = step.user;
      c.log("info", `USER ${step.user}`);
      return;
    case "COPY":
      return copyStep(c, step);
  }
}

/** RUN: the command's output goes to the log line by line; a non-zero exit fails the step. */
export async function runCommand(c: StepContext, cmd: string, user: string): Promise<void> {
  const out = new LineSplitter((l) => c.log("info", l));
  const err = new LineSplitter((l) => c.log("warn", l));
  const r = await startProcess(
    c.target,
    { cmd: "/bin/bash", args: ["-l", "-c", cmd], user, cwd: c.state.workdir, envs: c.state.env, timeoutMs: c.remainingMs() },
    { signal: c.signal, onOutput: (s, b) => (s === "stdout" ? out : err).push(b), wantsOutput: () => c.wantsOutput() },
  );
  out.end();
  err.end();
  if (r.exitCode !== 0) throw new StepFailed(`command failed with exit code ${r.exitCode}${r.status ? ` (${r.status})` : ""}`);
}

/** An ENV value expanded in TypeScript with Docker's rules (env-expand.ts): no shell ever sees it. */
function expandValue(vars: Readonly<Record<string, string>>, value: string): string {
  try {
    const out = expandEnv(value, (k) => vars[k]);
    if (out.length > MAX_ENV_VALUE) throw new StepFailed(`the expanded value is longer than ${MAX_ENV_VALUE} characters`);
    return out;
  } catch (err) {
    if (err instanceof EnvExpansionError) throw new StepFailed(err.message);
    throw err;
  }
}

/** The guest's own environment for the current user (HOME, PATH, …), which `$VAR` may name beside the ENV so far. */
async function guestBaseEnv(c: StepContext): Promise<Record<string, string>> {
  const r = await captureOutput(
    c.target,
    { cmd: "/usr/bin/env", args: ["-0"], user: c.state.user, cwd: c.state.workdir, envs: {}, timeoutMs: Math.min(30_000, c.remainingMs()) },
    MAX_ENV_VALUE,
    c.signal,
  );
  if (r.result.exitCode !== 0) throw new StepFailed(`reading the sandbox's environment failed: ${r.stderr.slice(0, 300)}`);
  return parseEnvBlock(r.stdout);
}

async function rootScript(c: StepContext, script: string, vars: Record<string, string>): Promise<void> {
  const r = await captureOutput(
    c.target,
    { cmd: "/bin/bash", args: ["-c", script], user: "root", cwd: "/", envs: { ...ROOT_ENV, ...vars }, timeoutMs: Math.min(5 * 60_000, c.remainingMs()) },
    64 * 1024,
    c.signal,
  );
  if (r.result.exitCode !== 0) throw new StepFailed(`${r.stderr.trim().slice(0, 500) || `exit code ${r.result.exitCode}`}`);
}

/**
 * Docker COPY semantics over the archive the SDK uploaded: a directory source copies its contents into dest, a
 * file source lands at dest (or inside it when dest ends with `/` or is a directory, or when a glob matched
 * several). Relative dest is under the workdir; owner defaults to the current user, mode applies when given.
 */
const COPY_SCRIPT = `set -e
X=$(mktemp -d /tmp/e2b-copy.XXXXXX)
trap 'rm -rf -- "$X" "$E2B_ARCHIVE"' EXIT
tar -xf "$E2B_ARCHIVE" -C "$X" --no-same-owner
cd "$X"
shopt -s nullglob dotglob
IFS=
S="\${E2B_SRC%/}"
M=( $S )
[ \${#M[@]} -gt 0 ] || { echo "COPY source $E2B_SRC is not in the uploaded archive" >&2; exit 1; }
D="$E2B_DEST"
into=0
case "$D" in */) into=1 ;; esac
[ -d "$D" ] && into=1
[ \${#M[@]} -gt 1 ] && into=1
T=()
for m in "\${M[@]}"; do
  if [ -d "$m" ] && [ ! -L "$m" ]; then
    mkdir -p -- "$D"
    for e in "$m"/*; do cp -a -- "$e" "$D/"; T+=("\${D%/}/$(basename -- "$e")"); done
    T+=("$D")
  elif [ "$into" = 1 ]; then
    mkdir -p -- "$D"
    cp -a -- "$m" "$D/"
    T+=("\${D%/}/$(basename -- "$m")")
  else
    mkdir -p -- "$(dirname -- "$D")"
    cp -a -- "$m" "$D"
    T+=("$D")
  fi
done
for t in "\${T[@]}"; do
  chown -R -- "$E2B_OWNER" "$t"
  [ -z "$E2B_MODE" ] || chmod -R -- "$E2B_MODE" "$t"
done
`;

async function copyStep(c: StepContext, step: Extract<BuildStep, { type: "COPY" }>): Promise<void> {
  if (!c.store) throw new StepFailed("no upload store is configured");
  // A store's refusal (an archive over the bound, S3 down or busy) is this step's failure, with its reason.
  const archive = await c.store.open(c.ns, c.name, step.hash).catch((err: unknown) => {
    throw new StepFailed(`reading the uploaded files failed: ${err instanceof E2bError ? err.message : "the upload store failed"}`);
  });
  if (!archive) throw new StepFailed(`no uploaded files with hash ${step.hash}: upload them first (the SDK does)`);
  // An unpredictable name: a tenant process in the guest cannot plant a link where root will write.
  const path = `/tmp/e2b-archive-${randomBytes(12).toString("hex")}.tar`;
  try {
    await uploadFile(c.target, path, "root", archive.body, archive.size, c.signal);
  } catch (err) {
    await archive.body.cancel().catch(() => undefined);
    if (err instanceof EnvdCallError) throw new StepFailed(`writing the files into the sandbox failed: ${err.message}`);
    throw err;
  }
  const dest = posixJoin(c.state.workdir, step.dest);
  await rootScript(c, COPY_SCRIPT, {
    E2B_ARCHIVE: path,
    E2B_SRC: step.src,
    E2B_DEST: dest,
    E2B_OWNER: step.owner ?? c.state.user,
    E2B_MODE: step.mode ?? "",
  });
  c.log("info", `COPY ${step.src} ${step.dest}`);
}
