// The full stack's sandbox-apiserver: served behind the real kube-apiserver's aggregation layer, as in a cluster.
// Its serving certificate comes from a CA made here; an APIService for v1beta1.agents.x-k8s.io points at an
// ExternalName Service `localhost` with that CA as caBundle. The process runs with the stack's admin kubeconfig
// (a local development stack: the chart's RBAC is tested elsewhere) and the fleet's root sandboxd token, with the
// warm-pool driver on, and the e2b surface when `e2b` is given.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { binary } from "./binary.ts";
import type { TestCluster } from "#tests/kube/harness.ts";
import { aggregatedServingCert, registerAggregatedApi } from "./aggregation.ts";
import type { StackFiles } from "./files.ts";
import { answers, waitFor, type Supervisor } from "./supervisor.ts";

export const NAMESPACE = "sandbox-system";
export const SERVICE = "sandbox-apiserver";

export interface ApiserverOptions {
  root: string;
  cluster: TestCluster;
  kubeconfig: string;
  files: StackFiles;
  sup: Supervisor;
  port: number;
  /** Extra flags (the e2b surface's, when it is served). */
  args?: string[];
}

export async function startAggregatedApiserver(o: ApiserverOptions): Promise<void> {
  const { cluster, files } = o;
  await cluster.apply(`apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NAMESPACE}}`);
  const { ca, serving } = await aggregatedServingCert(SERVICE, NAMESPACE, "sandbox-stack-apiserver-ca");
  const certFile = join(files.work, "apiserver.crt");
  const keyFile = join(files.work, "apiserver.key");
  writeFileSync(certFile, serving.certPem);
  writeFileSync(keyFile, serving.keyPem, { mode: 0o600 });

  o.sup.spawn(
    "sandbox-apiserver",
    [
      ...binary(o.root, "sandbox-apiserver"),
      `--secure-port=${o.port}`,
      "--bind-address=127.0.0.1",
      `--tls-cert-file=${certFile}`,
      `--tls-private-key-file=${keyFile}`,
      `--authentication-kubeconfig=${o.kubeconfig}`,
      `--authorization-kubeconfig=${o.kubeconfig}`,
      `--sandboxd-token-file=${files.rootTokenFile}`,
      "--warm-pool-sync-interval=2s",
      ...(o.args ?? []),
    ],
    { KUBECONFIG: o.kubeconfig, POD_NAMESPACE: NAMESPACE },
  );
  await waitFor("sandbox-apiserver /readyz", () => answers(`https://127.0.0.1:${o.port}/readyz`, [200], { tls: { ca: ca.certPem } }), 60_000);

  await registerAggregatedApi(cluster, { group: "agents.x-k8s.io", version: "v1beta1", service: SERVICE, namespace: NAMESPACE, port: o.port, caPem: ca.certPem });
}
