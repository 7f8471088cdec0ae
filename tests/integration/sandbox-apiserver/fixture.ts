// The real aggregation path for sandbox-apiserver tests: a test kube-apiserver with the front-proxy flags, the
// NodeInventory and agent-sandbox CRDs, the ServiceAccount and RBAC the chart renders (real helm), and our server as a
// subprocess reached only through the aggregator (APIService → ExternalName Service `localhost`, serving cert SAN
// sandbox-apiserver.sandbox-system.svc, its CA in caBundle). NodeInventories are applied by the test ("the harness
// plays vk-sandbox"), so publishedAt is the test's to choose.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { aggregatedServingCert, registerAggregatedApi } from "#scripts/stack/aggregation.ts";
import { type KubeObject, render } from "../chart/helm.ts";
import { startKubeApiserver, type TestCluster } from "../../kube/harness.ts";
import { freePorts } from "../../kube/ports.ts";
import { vouchingNode } from "../../kube/nodes.ts";
import { GiveUp, waitFor } from "#tests/support/wait.ts";

const REPO = join(import.meta.dir, "../../..");
export const SERVICE = "sandbox-apiserver";
export const NAMESPACE = "sandbox-system";

const RBAC_KINDS = new Set(["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]);
const AUTH_READER_BINDING = "sandbox-apiserver-auth-reader";
let chartRbac: Promise<KubeObject[]> | undefined;

/**
 * The chart's own ServiceAccount and RBAC for sandbox-apiserver, rendered by the real helm with default values (the
 * warm-pool driver on), so every test here proves the chart grants enough. Rendered once per test process.
 */
function sandboxApiserverRbac(): Promise<KubeObject[]> {
  chartRbac ??= render({}, { includeCrds: false, namespace: NAMESPACE }).then((objs) =>
    objs.filter((o) => RBAC_KINDS.has(o.kind) && o.metadata.labels?.["app.kubernetes.io/name"] === SERVICE),
  );
  return chartRbac;
}

/** The chart's RoleBinding to extension-apiserver-authentication-reader in kube-system (left out by `authReader: false`). */
export async function authReaderBinding(): Promise<KubeObject[]> {
  const objs = (await sandboxApiserverRbac()).filter((o) => o.kind === "RoleBinding" && o.metadata.name === AUTH_READER_BINDING);
  if (objs.length !== 1) throw new Error(`the chart renders ${objs.length} RoleBindings ${AUTH_READER_BINDING}, expected 1`);
  return objs;
}

export interface InventoryInput {
  node: string;
  address?: string;
  publishedAt?: string | null;
  pools?: { template: string; net?: string; size?: string; warm: number; target: number }[];
  entries?: Record<string, unknown>[];
}

export interface ApiserverProcess {
  port: number;
  proc: Subprocess;
  stderr(): string;
  /** SIGTERM and wait; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number>;
}

export interface StartServerOptions {
  args?: string[];
  env?: Record<string, string>;
  port?: number;
  waitReady?: boolean;
  /** false leaves out --tls-cert-file/--tls-private-key-file (the server self-signs in --cert-dir). */
  servingCert?: boolean;
}

export interface Stack {
  cluster: TestCluster;
  dir: string;
  /** kubeconfig of the cluster admin (system:masters). */
  admin: string;
  /** kubeconfig of the apiserver's ServiceAccount. */
  serverKubeconfig: string;
  certFile: string;
  keyFile: string;
  caPem: string;
  startServer(o?: StartServerOptions): Promise<ApiserverProcess>;
  /** Points the APIService at a server's port and waits until it is Available. */
  register(port: number): Promise<void>;
  publish(inv: InventoryInput): Promise<void>;
  /**
   * Publishes `inv` and returns once the registered server's inventory view holds this very publish (instead of
   * sleeping, or reading before the informer's WATCH delivered it): the publish carries a fence entry in namespace
   * publish-fence, named once, which a list of that namespace through the aggregator shows only after the server
   * applied the object. Nothing else reads that namespace.
   */
  publishSeen(inv: InventoryInput): Promise<void>;
  unpublish(node: string): Promise<void>;
  stop(): Promise<void>;
}

const children = new Set<Subprocess>();
const START_ATTEMPTS = 3;

/** The server exited because its port was bound by someone else between freePorts and its listen. */
class PortTaken extends GiveUp {
  override name = "PortTaken";
}
process.on("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

export async function startStack(o: { authReader?: boolean; crds?: boolean } = {}): Promise<Stack> {
  const cluster = await startKubeApiserver();
  const dir = mkdtempSync(join(tmpdir(), "sandbox-apiserver-it-"));
  try {
    const crds = ["nodeinventories.sandbox.cocoonstack.io.yaml", "nodeinventoryshards.sandbox.cocoonstack.io.yaml", "sandboxwarmpools.extensions.agents.x-k8s.io.yaml", "sandboxtemplates.extensions.agents.x-k8s.io.yaml"];
    const docs = [`apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NAMESPACE}}`];
    if (o.crds !== false) for (const f of crds) docs.push(readFileSync(join(REPO, "manifests/crds", f), "utf8"));
    await cluster.apply(docs.join("\n---\n"));
    const rbac = await sandboxApiserverRbac();
    await cluster.apply(o.authReader === false ? rbac.filter((r) => r.metadata.name !== AUTH_READER_BINDING) : rbac);
    const token = await cluster.serviceAccountToken(NAMESPACE, SERVICE, 7200);
    const serverKubeconfig = cluster.kubeconfig({ auth: "token", token, path: join(dir, "server.kubeconfig") });
    const admin = cluster.kubeconfig({ path: join(dir, "admin.kubeconfig") });
    const { ca, serving } = await aggregatedServingCert(SERVICE, NAMESPACE, "sandbox-apiserver-test-ca");
    const certFile = join(dir, "serving.crt");
    const keyFile = join(dir, "serving.key");
    writeFileSync(certFile, serving.certPem);
    writeFileSync(keyFile, serving.keyPem, { mode: 0o600 });

    async function spawnServer(so: StartServerOptions, port: number): Promise<ApiserverProcess> {
      let err = "";
      const proc = Bun.spawn(
        [
          process.execPath,
          join(REPO, "services/sandbox-apiserver/main.ts"),
          `--secure-port=${port}`,
          "--bind-address=127.0.0.1",
          ...(so.servingCert === false ? [] : [`--tls-cert-file=${certFile}`, `--tls-private-key-file=${keyFile}`]),
          `--authentication-kubeconfig=${serverKubeconfig}`,
          `--authorization-kubeconfig=${serverKubeconfig}`,
          ...(so.args ?? []),
        ],
        {
          stdio: ["ignore", "ignore", "pipe"],
          env: { ...process.env, KUBECONFIG: serverKubeconfig, POD_NAMESPACE: NAMESPACE, ...(so.env ?? {}) },
        },
      );
      children.add(proc);
      void (async () => {
        const dec = new TextDecoder();
        for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) err += dec.decode(chunk);
      })();
      const p: ApiserverProcess = {
        port,
        proc,
        stderr: () => err,
        async stop(signal = "SIGTERM") {
          proc.kill(signal);
          const code = await proc.exited;
          children.delete(proc);
          return code;
        },
      };
      if (so.waitReady !== false) {
        const tls = so.servingCert === false ? { rejectUnauthorized: false } : { ca: ca.certPem };
        await waitFor("sandbox-apiserver /readyz", async () => {
          if (proc.exitCode !== null) {
            children.delete(proc);
            if (err.includes("EADDRINUSE")) throw new PortTaken(`sandbox-apiserver port ${port} was taken before it bound it:\n${err}`);
            throw new GiveUp(`sandbox-apiserver exited ${proc.exitCode}:\n${err}`);
          }
          const r = await fetch(`https://127.0.0.1:${port}/readyz`, { tls }); // throws while not listening yet
          await r.body?.cancel();
          return r.ok;
        }, 30_000).catch((e: unknown) => {
          throw e instanceof GiveUp ? e : new Error(`sandbox-apiserver not ready in 30 s:\n${err}`);
        });
      }
      return p;
    }

    let fences = 0;
    const stack: Stack = {
      cluster,
      dir,
      admin,
      serverKubeconfig,
      certFile,
      keyFile,
      caPem: ca.certPem,
      async startServer(so = {}) {
        // A port from freePorts can be taken by another process before the server binds it; a server that lost
        // that race (EADDRINUSE) is started again on a fresh port. A port the test chose itself is not retried.
        for (let attempt = 1; ; attempt++) {
          try {
            return await spawnServer(so, so.port ?? freePorts(1)[0]!);
          } catch (e) {
            if (so.port !== undefined || attempt >= START_ATTEMPTS || !(e instanceof PortTaken)) throw e;
          }
        }
      },
      async register(port) {
        await registerAggregatedApi(cluster, { group: "agents.x-k8s.io", version: "v1beta1", service: SERVICE, namespace: NAMESPACE, port, caPem: ca.certPem });
      },
      async publish(inv) {
        // The readers call an inventory only when its Node vouches for the address (shared/fleet/trust.ts).
        await vouchingNode(cluster, inv.node, inv.address);
        const publishedAt = inv.publishedAt === undefined ? new Date().toISOString().replace(/\.\d{3}Z$/, "Z") : inv.publishedAt;
        await cluster.apply([
          {
            apiVersion: "sandbox.cocoonstack.io/v1beta1",
            kind: "NodeInventory",
            metadata: { name: inv.node },
            node: inv.node,
            ...(inv.address !== undefined ? { address: inv.address } : {}),
            ...(publishedAt ? { publishedAt } : {}),
            pools: inv.pools ?? [],
            entries: inv.entries ?? [],
          },
        ]);
      },
      async publishSeen(inv) {
        const fence = `${inv.node}-${++fences}`;
        await stack.publish({ ...inv, entries: [...(inv.entries ?? []), { name: `publish-fence/${fence}`, id: `sb_fence${fences}`, phase: "Running" }] });
        await waitFor(`the server to see publish ${fence}`, async () => {
          const r = await cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/publish-fence/sandboxes");
          if (!r.ok) {
            await r.body?.cancel();
            return false;
          }
          const body = (await r.json()) as { items?: { metadata: { name: string } }[] };
          return body.items?.some((i) => i.metadata.name === fence) ?? false;
        }, 30_000, 20);
      },
      async unpublish(node) {
        const r = await cluster.adminFetch(`/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/${node}`, { method: "DELETE" });
        await r.body?.cancel();
      },
      async stop() {
        for (const c of children) c.kill("SIGKILL");
        await cluster.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
    return stack;
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

/** RFC 3339 with whole seconds. */
export function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/**
 * Reads a watch response line by line (blank keep-alive lines skipped) until it ends, fails, or `onLine` returns
 * true. Resolves when reading stopped; `stop()` cancels it.
 */
export function readLines(res: Response, onLine: (line: string) => boolean | void): { done: Promise<void>; stop(): Promise<void> } {
  const reader = res.body!.getReader();
  const done = (async () => {
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { done: end, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (end) return;
      buf += dec.decode(value, { stream: true });
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line && onLine(line) === true) {
          await reader.cancel().catch(() => undefined);
          return;
        }
      }
    }
  })();
  return { done, stop: () => reader.cancel().catch(() => undefined) };
}
