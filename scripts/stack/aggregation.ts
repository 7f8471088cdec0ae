// Putting an aggregated apiserver that runs on this machine behind a kube-apiserver's aggregation layer, as the local
// stack and the sandbox-apiserver tests both do:
//   - a serving certificate from a fresh CA with the SAN `<service>.<namespace>.svc` (the name the aggregator checks)
//     plus localhost/127.0.0.1;
//   - a Service of type ExternalName `localhost` (the aggregator's cluster resolver dials
//     https://<externalName>:<port>; Endpoints on loopback are refused by validation) and the APIService with that
//     CA as caBundle;
//   - a wait until the APIService is Available on that port and the aggregator's proxy actually answers (the proxy
//     handler can trail the availability condition by a moment).
// The cluster is anything that can apply objects and fetch as an admin (the test harness's TestCluster is one).
import { type CertificateAuthority, type CertKeyPem, createCA, issueCertificate } from "#shared/tls/index.ts";

export interface AggregatedBackend {
  group: string;
  version: string;
  service: string;
  namespace: string;
  port: number;
  caPem: string;
}

export interface AggregationCluster {
  apply(objects: object[]): Promise<void>;
  adminFetch(path: string, init?: RequestInit): Promise<Response>;
}

/** The ExternalName-localhost Service and the APIService for `b`. */
export function apiServiceObjects(b: AggregatedBackend): object[] {
  return [
    { apiVersion: "v1", kind: "Service", metadata: { name: b.service, namespace: b.namespace }, spec: { type: "ExternalName", externalName: "localhost" } },
    {
      apiVersion: "apiregistration.k8s.io/v1",
      kind: "APIService",
      metadata: { name: `${b.version}.${b.group}` },
      spec: {
        group: b.group,
        version: b.version,
        groupPriorityMinimum: 1000,
        versionPriority: 100,
        service: { name: b.service, namespace: b.namespace, port: b.port },
        caBundle: Buffer.from(b.caPem).toString("base64"),
      },
    },
  ];
}

/** A CA and the serving certificate it signed for `<service>.<namespace>.svc`, localhost and 127.0.0.1. */
export async function aggregatedServingCert(service: string, namespace: string, caName: string): Promise<{ ca: CertificateAuthority; serving: CertKeyPem }> {
  const ca = await createCA(caName);
  const svc = `${service}.${namespace}.svc`;
  const serving = await issueCertificate({ ca, cn: svc, dnsNames: [svc, "localhost"], ips: ["127.0.0.1"], usages: "server" });
  return { ca, serving };
}

/**
 * Applies the Service and APIService for `b` (a re-registration points them at a new port), then waits until the
 * APIService is Available on `b.port` and a discovery GET through the aggregator answers 2xx.
 */
export async function registerAggregatedApi(cluster: AggregationCluster, b: AggregatedBackend, timeoutMs = 60_000): Promise<void> {
  await cluster.apply(apiServiceObjects(b));
  const name = `${b.version}.${b.group}`;
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    const r = await cluster.adminFetch(`/apis/apiregistration.k8s.io/v1/apiservices/${name}`);
    const s = (await r.json()) as { spec?: { service?: { port?: number } }; status?: { conditions?: { type: string; status: string; message?: string }[] } };
    const avail = s.status?.conditions?.find((c) => c.type === "Available");
    last = JSON.stringify(avail);
    if (avail?.status === "True" && s.spec?.service?.port === b.port) {
      const probe = await cluster.adminFetch(`/apis/${b.group}/${b.version}`);
      await probe.body?.cancel();
      if (probe.ok) return;
    }
    if (Date.now() > deadline) throw new Error(`APIService ${name} not Available on port ${b.port} within ${timeoutMs / 1000} s: ${last}`);
    await Bun.sleep(200);
  }
}
