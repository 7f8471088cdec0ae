// The objects that put an aggregated apiserver running on this machine behind a test kube-apiserver: a Service of
// type ExternalName `localhost` (the aggregator's cluster resolver dials https://<externalName>:<port>; Endpoints on
// loopback are refused by validation) and the APIService with the serving CA in caBundle. The backend's serving
// certificate must carry the SAN `<service>.<namespace>.svc` (anchors.md §F).
export interface AggregatedBackend {
  group: string;
  version: string;
  service: string;
  namespace: string;
  port: number;
  caPem: string;
}

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
