// Where the apiserver is and how to authenticate to it: the in-cluster service account first, else $KUBECONFIG
// (several colon-separated files merged as kubectl merges them), exactly as the seed says. Never ~/.kube/config:
// a node daemon must not silently start as whatever admin identity root's home directory holds. We parse the
// kubeconfig ourselves: @kubernetes/client-node's loader is fine, but everything it resolves would then have to be
// carried over to our transport anyway, and a single owner of path resolution is easier to test.
import { readFile } from "node:fs/promises";
import { existsSync, readFileSync } from "node:fs";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { proxyForUrl } from "./proxy.ts";

export interface KubeConnection {
  /** https://host:port, no trailing slash. */
  server: string;
  caPem?: string;
  certPem?: string;
  keyPem?: string;
  /** A fixed bearer token. When `tokenFile` is set too, the file wins and is re-read (projected tokens rotate). */
  token?: string;
  tokenFile?: string;
  insecureSkipVerify?: boolean;
  /** The default namespace: the context's, or the service account's. */
  namespace?: string;
  /** TLS server name to verify instead of the server URL's host (kubeconfig `tls-server-name`). */
  tlsServerName?: string;
  /** The proxy to reach the server through (HTTPS_PROXY/NO_PROXY as client-go reads them); absent = direct. */
  proxyUrl?: string;
}

export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

export class KubeConfigError extends Error {
  override name = "KubeConfigError";
}

/**
 * Finds the apiserver connection. `env` defaults to process.env; `serviceAccountDir` lets tests stand in a temp
 * dir for the mounted service account. Throws KubeConfigError when neither source is there (the caller exits 1).
 */
export async function loadKubeConnection(
  env: Record<string, string | undefined> = process.env,
  opts: { serviceAccountDir?: string } = {},
): Promise<KubeConnection> {
  const conn = await findConnection(env, opts);
  const proxyUrl = proxyForUrl(conn.server, env);
  return proxyUrl ? { ...conn, proxyUrl } : conn;
}

async function findConnection(env: Record<string, string | undefined>, opts: { serviceAccountDir?: string }): Promise<KubeConnection> {
  const inCluster = await loadInCluster(env, opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR);
  if (inCluster) return inCluster;
  const files = kubeconfigFiles(env);
  const present = files.filter((f) => existsSync(f));
  if (present.length === 0) {
    const where = env.KUBECONFIG ? `KUBECONFIG=${env.KUBECONFIG} names no existing file` : "KUBECONFIG is not set";
    throw new KubeConfigError(
      `no Kubernetes connection: not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset or no service account token) and ${where}`,
    );
  }
  const docs = await Promise.all(present.map(async (path) => ({ path, doc: await readKubeconfig(path) })));
  return connectionFromKubeconfigs(docs);
}

// client-go's rest.InClusterConfig: both variables must be set and the token file readable.
async function loadInCluster(env: Record<string, string | undefined>, dir: string): Promise<KubeConnection | undefined> {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) return undefined;
  const tokenFile = join(dir, "token");
  let token: string;
  try {
    token = (await readFile(tokenFile, "utf8")).trim();
  } catch {
    return undefined;
  }
  const caPem = await readFile(join(dir, "ca.crt"), "utf8").catch(() => undefined);
  const namespace = (await readFile(join(dir, "namespace"), "utf8").catch(() => undefined))?.trim();
  const h = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  return { server: `https://${h}:${port}`, caPem, token, tokenFile, namespace: namespace || undefined };
}

function kubeconfigFiles(env: Record<string, string | undefined>): string[] {
  // No ~/.kube/config fallback (kubectl's default): unset KUBECONFIG outside a cluster is a startup error.
  return (env.KUBECONFIG ?? "").split(delimiter).filter((p) => p.length > 0);
}

async function readKubeconfig(path: string): Promise<Kubeconfig> {
  const text = await readFile(path, "utf8");
  // Loaded here, not at start-up: in a cluster (the service account) no YAML is ever read (idle RSS,
  // docs/performance.md "Idle memory").
  const { parse: parseYaml } = await import("yaml");
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new KubeConfigError(`kubeconfig ${path}: not valid YAML: ${(e as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new KubeConfigError(`kubeconfig ${path}: not a mapping`);
  return doc as Kubeconfig;
}

/** The parts of a kubeconfig we read; entries stay loose records because files in the wild vary. */
export interface Kubeconfig {
  "current-context"?: string;
  clusters?: { name?: string; cluster?: Record<string, unknown> }[];
  users?: { name?: string; user?: Record<string, unknown> }[];
  contexts?: { name?: string; context?: Record<string, unknown> }[];
}

/** An entry plus the directory its relative paths resolve against (the file that defined it). */
interface Sourced {
  dir: string;
  path: string;
  value: Record<string, unknown>;
}

/**
 * Merges several parsed kubeconfigs as kubectl does: the first file to define a cluster, user or context name wins
 * it (later files cannot change it), and current-context comes from the first file that sets one. Exported for tests.
 */
export function connectionFromKubeconfigs(docs: { path: string; doc: Kubeconfig }[]): KubeConnection {
  const clusters = new Map<string, Sourced>();
  const users = new Map<string, Sourced>();
  const contexts = new Map<string, Sourced>();
  let current: string | undefined;
  for (const { path, doc } of docs) {
    const dir = dirname(resolve(path));
    if (!current && doc["current-context"]) current = doc["current-context"];
    const add = (into: Map<string, Sourced>, list: unknown, field: string) => {
      if (!Array.isArray(list)) return;
      for (const e of list) {
        const name = (e as { name?: unknown } | null)?.name;
        if (typeof name !== "string" || into.has(name)) continue;
        const value = (e as Record<string, unknown>)[field];
        into.set(name, { dir, path, value: typeof value === "object" && value ? (value as Record<string, unknown>) : {} });
      }
    };
    add(clusters, doc.clusters, "cluster");
    add(users, doc.users, "user");
    add(contexts, doc.contexts, "context");
  }
  const files = docs.map((d) => d.path).join(delimiter);
  if (!current) throw new KubeConfigError(`kubeconfig ${files}: no current-context`);
  const ctx = contexts.get(current);
  if (!ctx) throw new KubeConfigError(`kubeconfig ${files}: context "${current}" is not defined`);
  const clusterName = str(ctx.value.cluster);
  const cluster = clusterName ? clusters.get(clusterName) : undefined;
  if (!cluster) throw new KubeConfigError(`kubeconfig ${files}: context "${current}" names no defined cluster ("${clusterName ?? ""}")`);
  const server = str(cluster.value.server);
  if (!server) throw new KubeConfigError(`kubeconfig ${cluster.path}: cluster "${clusterName}" has no server`);

  const conn: KubeConnection = { server: server.replace(/\/+$/, "") };
  const ns = str(ctx.value.namespace);
  if (ns) conn.namespace = ns;
  if (cluster.value["insecure-skip-tls-verify"] === true) conn.insecureSkipVerify = true;
  const sni = str(cluster.value["tls-server-name"]);
  if (sni) conn.tlsServerName = sni;
  conn.caPem = dataOrFile(cluster, "certificate-authority-data", "certificate-authority");

  const userName = str(ctx.value.user);
  const user = userName ? users.get(userName) : undefined;
  if (userName && !user) throw new KubeConfigError(`kubeconfig ${files}: context "${current}" names undefined user "${userName}"`);
  if (user) {
    conn.certPem = dataOrFile(user, "client-certificate-data", "client-certificate");
    conn.keyPem = dataOrFile(user, "client-key-data", "client-key");
    const token = str(user.value.token);
    if (token) conn.token = token;
    const tokenFile = str(user.value.tokenFile);
    if (tokenFile) conn.tokenFile = resolvePath(user.dir, tokenFile);
    if (!token && !tokenFile && !conn.certPem && (user.value.exec || user.value["auth-provider"])) {
      throw new KubeConfigError(
        `kubeconfig ${user.path}: user "${userName}" uses an exec or auth-provider plugin, which this client does not run; use a token, tokenFile or client certificate`,
      );
    }
    if (!!conn.certPem !== !!conn.keyPem) {
      throw new KubeConfigError(`kubeconfig ${user.path}: user "${userName}" has a client certificate without a key, or a key without a certificate`);
    }
  }
  for (const k of Object.keys(conn) as (keyof KubeConnection)[]) if (conn[k] === undefined) delete conn[k];
  return conn;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v.length > 0 ? v : undefined);

function resolvePath(dir: string, p: string): string {
  return isAbsolute(p) ? p : join(dir, p);
}

// "-data" fields are base64 PEM inline; the plain field names a file, relative to the kubeconfig that named it.
// kubectl prefers the inline data when both are set.
function dataOrFile(src: Sourced, dataKey: string, fileKey: string): string | undefined {
  const data = str(src.value[dataKey]);
  if (data) return Buffer.from(data, "base64").toString("utf8");
  const file = str(src.value[fileKey]);
  if (!file) return undefined;
  const full = resolvePath(src.dir, file);
  try {
    return readFileSync(full, "utf8");
  } catch (e) {
    throw new KubeConfigError(`kubeconfig ${src.path}: ${fileKey} ${full}: ${(e as Error).message}`);
  }
}
