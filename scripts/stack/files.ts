// The local stack's files. Per run: a temp work dir (root token, envd secret, key and alias files, kubeconfig,
// claim state, sandbox directories), removed on stop. Across runs, in the state dir ($STACK_STATE_DIR, default
// $SANDBOX_CACHE/stack): the e2b API key, generated at first start so the printed export line stays valid, the
// logs of the last run, and the build API's directory store (COPY archives are keyed by content hash, so keeping
// them lets a rebuild skip its uploads).
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";

export interface StackFiles {
  work: string;
  stateDir: string;
  logDir: string;
  rootToken: string;
  rootTokenFile: string;
  envdSecretFile: string;
  apiKey: string;
  apiKeyFile: string;
  aliasFile: string;
  /** The directory store of the build API (--e2b-build-dir). */
  buildDir: string;
}

/**
 * The SDK's default template name maps to the simulated pools' image (e2b.md §3.3), and so does the image a build's
 * `Template().fromBaseImage()` sends (`e2bdev/base`): builds start from that pool.
 */
export const TEMPLATE_IMAGE = "base:24.04";
export const BUILD_BASE_IMAGE = "e2bdev/base";
// code-interpreter-v1: the code interpreter SDKs' default template; the simulator's guest serves its port 49999.
export const ALIASES = `base ${TEMPLATE_IMAGE}
code-interpreter-v1 ${TEMPLATE_IMAGE}
${BUILD_BASE_IMAGE} ${TEMPLATE_IMAGE}
`;

/** The build API's flags, the same in both modes: on, with the directory store in the state dir. */
export function buildFlags(files: Pick<StackFiles, "buildDir">): string[] {
  return ["--e2b-builds", `--e2b-build-dir=${files.buildDir}`];
}

export function stateDirOf(env: Record<string, string | undefined> = process.env): string {
  if (env.STACK_STATE_DIR) return env.STACK_STATE_DIR;
  const cache = env.SANDBOX_CACHE || join(homedir(), ".cache", "sandbox-control-plane");
  return join(cache, "stack");
}

/** The API key, created at first start (mode 0600) and reused after; second return value: whether it is new. */
function apiKey(stateDir: string): { key: string; created: boolean } {
  const path = join(stateDir, "e2b-api-key");
  if (existsSync(path)) {
    const key = readFileSync(path, "utf8").trim();
    if (key) return { key, created: false };
  }
  const key = `e2b_${randomBytes(20).toString("hex")}`;
  writeFileSync(path, `${key}\n`, { mode: 0o600 });
  return { key, created: true };
}

export function prepareFiles(env: Record<string, string | undefined> = process.env): StackFiles & { apiKeyCreated: boolean } {
  const stateDir = stateDirOf(env);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const { key, created } = apiKey(stateDir);
  const work = mkdtempSync(join(tmpdir(), "sandbox-stack-"));
  const file = (name: string, text: string) => {
    const p = join(work, name);
    writeFileSync(p, text, { mode: 0o600 });
    return p;
  };
  const rootToken = env.STACK_SANDBOXD_TOKEN || randomBytes(16).toString("hex");
  return {
    work,
    stateDir,
    logDir: join(stateDir, "logs"),
    rootToken,
    rootTokenFile: file("sandboxd-token", `${rootToken}\n`),
    envdSecretFile: file("envd-secret", `${randomBytes(32).toString("hex")}\n`),
    apiKey: key,
    apiKeyCreated: created,
    apiKeyFile: file("e2b-api-keys", `${key} default\n`),
    aliasFile: file("e2b-aliases", ALIASES),
    buildDir: join(stateDir, "build-uploads"),
  };
}
