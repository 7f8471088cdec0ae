// Builds and caches the Go test peers: kube-apiserver (with embedded etcd, from the wrapper module in ./apiserver),
// kubectl (k8s.io/kubernetes/cmd/kubectl from the same wrapper module, so the same version and the same go.sum; its
// packages are already in the module cache and most of them in the build cache after the apiserver), and helm. Both come from the Go module proxy (tests/kube/README.md "Building the peers") and are built once per machine: the cache key
// is the version plus, for the apiserver, a hash of the wrapper's go.mod, go.sum and main.go, so editing the
// wrapper rebuilds and nothing else does.
//
//   bun run tests/kube/peers.ts ensure            build what is missing, print cold/cached times
//   bun run tests/kube/peers.ts path kube-apiserver|kubectl|helm
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export const K8S_VERSION = "v1.35.4";
export const HELM_VERSION = "v3.22.0";

const wrapperDir = join(import.meta.dir, "apiserver");

export function cacheRoot(): string {
  return process.env.SANDBOX_CACHE || join(homedir(), ".cache", "sandbox-control-plane");
}

/** `v1.35.4-<12 hex>`: the k8s version plus a hash of everything in the wrapper that changes the binary. */
export function kubeApiserverKey(): string {
  const h = createHash("sha256");
  for (const f of ["go.mod", "go.sum", "main.go"]) {
    h.update(f).update("\0").update(readFileSync(join(wrapperDir, f))).update("\0");
  }
  return `${K8S_VERSION}-${h.digest("hex").slice(0, 12)}`;
}

export function kubeApiserverPath(): string {
  return join(cacheRoot(), `kube-apiserver-${kubeApiserverKey()}`, "kube-apiserver-etcd");
}

/** kubectl lives beside the apiserver it was built with: the same cache key, the same k8s version. */
export function kubectlPath(): string {
  return join(cacheRoot(), `kube-apiserver-${kubeApiserverKey()}`, "kubectl");
}

/**
 * The node's Kubernetes binaries, built in the same wrapper module (same replace block, same go.sum, same version
 * ldflags) beside kube-apiserver and kubectl: what the single-node cluster of tests/kube/node/ runs.
 */
export const NODE_BINARIES = ["kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager"] as const;
export type NodeBinary = (typeof NODE_BINARIES)[number];

export function helmPath(): string {
  return join(cacheRoot(), `helm-${HELM_VERSION}`, "helm");
}

export interface EnsureResult {
  path: string;
  built: boolean;
  seconds: number;
}

/** Path of the kube-apiserver+etcd binary, building it first if this key has never been built here. */
export async function kubeApiserverBinary(): Promise<string> {
  return (await ensureKubeApiserver()).path;
}

/** Path of the kubectl binary, building it first if missing. */
export async function kubectlBinary(): Promise<string> {
  return (await ensureKubectl()).path;
}

/** Path of the helm binary, installing it first if missing. */
export async function helmBinary(): Promise<string> {
  return (await ensureHelm()).path;
}

function versionLdflags(): string {
  const [major, minor] = K8S_VERSION.replace(/^v/, "").split(".");
  const pkg = "k8s.io/component-base/version";
  return [
    "-s -w",
    // Without these /version reports v0.0.0-master and helm's kubeVersion constraints fail (tests/kube/README.md "Building the peers");
    // kubectl prints its client version from the same variables.
    `-X ${pkg}.gitVersion=${K8S_VERSION}`,
    `-X ${pkg}.gitMajor=${major}`,
    `-X ${pkg}.gitMinor=${minor}`,
    `-X ${pkg}.gitTreeState=clean`,
  ].join(" ");
}

export function ensureKubeApiserver(): Promise<EnsureResult> {
  return ensure(kubeApiserverPath(), (tmp) => [
    ["go", "build", "-trimpath", "-ldflags", versionLdflags(), "-o", tmp, "."],
    wrapperDir,
  ]);
}

/**
 * kubectl from the wrapper module: `go build k8s.io/kubernetes/cmd/kubectl` resolves through the wrapper's replace
 * block, so it needs no module of its own. Built after the apiserver (ensure orders them) so the shared
 * client-go/apimachinery packages come from the build cache: about a minute warm.
 */
export function ensureKubectl(): Promise<EnsureResult> {
  return ensure(kubectlPath(), (tmp) => [
    ["go", "build", "-trimpath", "-ldflags", versionLdflags(), "-o", tmp, "k8s.io/kubernetes/cmd/kubectl"],
    wrapperDir,
  ]);
}

/**
 * kubelet, kube-proxy, kube-scheduler and kube-controller-manager in one `go build` (they share most packages), into
 * a directory renamed into place: about 90 s with the apiserver's build cache warm, 5 min cold (2 cores).
 */
export async function ensureNodeBinaries(): Promise<EnsureResult> {
  const dir = join(cacheRoot(), `kube-apiserver-${kubeApiserverKey()}`, "node");
  const r = await ensure(dir, (tmp) => {
    mkdirSync(tmp, { recursive: true });
    return [
      ["go", "build", "-trimpath", "-ldflags", versionLdflags(), "-o", `${tmp}/`, ...NODE_BINARIES.map((b) => `k8s.io/kubernetes/cmd/${b}`)],
      wrapperDir,
    ];
  });
  return r;
}

/** Path of a node binary (all four built on first call). */
export async function nodeBinary(name: NodeBinary): Promise<string> {
  return join((await ensureNodeBinaries()).path, name);
}

export function ensureHelm(): Promise<EnsureResult> {
  const target = helmPath();
  return ensure(target, (tmp) => {
    // helm's release Makefile stamps its version and its default Kubernetes capabilities (major+1 / minor of the
    // client-go it was built with); `go install` alone leaves the capabilities at v1.20 and the version at "v3.22".
    const minor = helmClientGoMinor();
    const ldflags = [
      "-s -w",
      `-X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}`,
      `-X helm.sh/helm/v3/internal/version.gitTreeState=clean`,
      ...(minor ? ["chartutil", "lint/rules"].flatMap((p) => [
        `-X helm.sh/helm/v3/pkg/${p}.k8sVersionMajor=1`,
        `-X helm.sh/helm/v3/pkg/${p}.k8sVersionMinor=${minor}`,
      ]) : []),
    ].join(" ");
    return [
      ["go", "install", "-trimpath", "-ldflags", ldflags, `helm.sh/helm/v3/cmd/helm@${HELM_VERSION}`],
      // go install writes into GOBIN under the command's name; `tmp` is a directory here.
      undefined,
      { GOBIN: tmp },
    ];
  }, "helm");
}

function helmClientGoMinor(): string | undefined {
  const r = Bun.spawnSync(["go", "mod", "download", "-json", `helm.sh/helm/v3@${HELM_VERSION}`], {
    stdout: "pipe",
    stderr: "inherit",
    env: goEnv(),
  });
  if (r.exitCode !== 0) return undefined;
  const { GoMod } = JSON.parse(r.stdout.toString()) as { GoMod?: string };
  if (!GoMod) return undefined;
  return /k8s\.io\/client-go v0\.(\d+)\./.exec(readFileSync(GoMod, "utf8"))?.[1];
}

function goEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env = { ...process.env, ...extra } as Record<string, string>;
  // Building from a module cache or a work tree without .git must not try to stamp VCS info.
  if (!/-buildvcs/.test(env.GOFLAGS ?? "")) env.GOFLAGS = `${env.GOFLAGS ?? ""} -buildvcs=false`.trim();
  return env;
}

export type BuildCommand = [argv: string[], cwd: string | undefined, env?: Record<string, string>];

/** A peer that `go install <module>/<cmd>@<version>` builds as published, cached under its name and version. */
export interface InstalledPeer {
  path(): string;
  ensure(): Promise<EnsureResult>;
  binary(): Promise<string>;
  /** The peer file's command line: `ensure` (build if missing, print cold/cached time) or `path`. */
  main(argv: string[]): Promise<void>;
}

export function goInstalledPeer(o: { name: string; version: string; pkg: string; ldflags: string }): InstalledPeer {
  const path = () => join(cacheRoot(), `${o.name}-${o.version}`, o.name);
  const ensurePeer = () =>
    ensure(path(), (tmp) => [["go", "install", "-trimpath", "-ldflags", o.ldflags, `${o.pkg}@${o.version}`], undefined, { GOBIN: tmp }], o.name);
  return {
    path,
    ensure: ensurePeer,
    binary: async () => (await ensurePeer()).path,
    async main(argv) {
      if (argv[0] === "ensure") {
        const r = await ensurePeer();
        console.error(`peers: ${o.name} ${o.version}: ${r.built ? "built cold" : "cached"} in ${r.seconds.toFixed(2)}s -> ${r.path}`);
      } else if (argv[0] === "path") {
        console.log(path());
      } else {
        console.error(`usage: bun run tests/kube/${o.name}.ts ensure | path`);
        process.exit(2);
      }
    },
  };
}

/**
 * Builds into a temporary sibling and renames it into place, under a directory lock, so two processes that both
 * find the peer missing build it once and nobody ever executes a half-written binary. `installs` names the binary
 * when the command is a `go install` into GOBIN=`tmp` (a directory) rather than a `go build -o tmp`.
 */
export async function ensure(target: string, command: (tmp: string) => BuildCommand, installs?: string): Promise<EnsureResult> {
  const started = performance.now();
  const seconds = () => (performance.now() - started) / 1000;
  if (existsSync(target)) return { path: target, built: false, seconds: seconds() };
  const dir = join(target, "..");
  mkdirSync(dir, { recursive: true });
  const release = await lock(`${dir}.lock`);
  try {
    if (existsSync(target)) return { path: target, built: false, seconds: seconds() };
    const tmp = `${target}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    const [argv, cwd, extraEnv] = command(tmp);
    console.error(`peers: building ${target} (${argv.slice(0, 2).join(" ")}; several minutes cold on 2 cores)`);
    const proc = Bun.spawn(argv, { cwd, env: goEnv(extraEnv), stdio: ["ignore", "inherit", "inherit"] });
    const code = await proc.exited;
    if (code !== 0) throw new Error(`peers: ${argv.join(" ")} exited ${code}`);
    renameSync(installs ? join(tmp, installs) : tmp, target);
    if (installs) rmSync(tmp, { recursive: true, force: true });
    return { path: target, built: true, seconds: seconds() };
  } finally {
    release();
  }
}

async function lock(path: string): Promise<() => void> {
  for (;;) {
    try {
      mkdirSync(path);
      writeFileSync(join(path, "pid"), String(process.pid));
      return () => rmSync(path, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if (lockHolderDead(path)) {
        rmSync(path, { recursive: true, force: true });
        continue;
      }
      await Bun.sleep(1000);
    }
  }
}

function lockHolderDead(path: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(path, "pid"), "utf8"));
  } catch {
    // Created but no pid yet: a holder that died in that instant leaves the lock behind, so age it out.
    try {
      return Date.now() - statSync(path).mtimeMs > 10_000;
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

function report(name: string, version: string, r: EnsureResult): void {
  const how = r.built ? "built cold" : "cached";
  console.error(`peers: ${name} ${version}: ${how} in ${r.seconds.toFixed(2)}s -> ${r.path}`);
}

if (import.meta.main) {
  const [cmd, which] = process.argv.slice(2);
  if (cmd === "ensure") {
    report("kube-apiserver", kubeApiserverKey(), await ensureKubeApiserver());
    report("kubectl", kubeApiserverKey(), await ensureKubectl());
    report("helm", HELM_VERSION, await ensureHelm());
    report("kubelet, kube-proxy, kube-scheduler, kube-controller-manager", kubeApiserverKey(), await ensureNodeBinaries());
  } else if (cmd === "path" && (which === "kube-apiserver" || which === "kubectl" || which === "helm")) {
    console.log(which === "helm" ? await helmBinary() : which === "kubectl" ? await kubectlBinary() : await kubeApiserverBinary());
  } else {
    console.error("usage: bun run tests/kube/peers.ts ensure | path kube-apiserver|kubectl|helm");
    process.exit(2);
  }
}
