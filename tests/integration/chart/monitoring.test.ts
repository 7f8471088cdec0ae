// The optional monitoring objects: off by default (seed 003's counts hold), a ServiceMonitor per metrics endpoint
// when on, and alerts whose every series and label is one the binaries really export (read from their prom-client
// registries, so a renamed metric breaks this test rather than silencing an alert in production).
import { describe, expect, test } from "bun:test";
import { ApiserverMetrics } from "#services/sandbox-apiserver/serving/metrics.ts";
import { RelayMetrics } from "#shared/relay/metrics.ts";
import { E2B, at, find, merge, render, type KubeObject, type Values } from "./helm.ts";

const ON = at("monitoring", { serviceMonitor: { enabled: true }, prometheusRule: { enabled: true } });

interface Rule {
  alert: string;
  expr: string;
  for: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

function rules(o: KubeObject): Rule[] {
  return (o.spec as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
}

/** name → label names, from a prom-client registry. */
function exported(registry: { getMetricsAsArray(): { name: string; labelNames?: readonly string[] }[] }): Map<string, Set<string>> {
  return new Map(registry.getMetricsAsArray().map((m) => [m.name, new Set(m.labelNames ?? [])]));
}

/** Every `sandbox_*` series an expression reads, and every label it matches on or aggregates by, exists. */
function checkExpr(expr: string, series: Map<string, Set<string>>): void {
  const names = [...new Set(expr.match(/\bsandbox_[a-z0-9_]+\b/g) ?? [])];
  expect(names.length).toBeGreaterThan(0);
  const labels = new Set<string>();
  for (const name of names) {
    expect(series.has(name) ? name : `${name} (not exported)`).toBe(name);
    for (const l of series.get(name) ?? []) labels.add(l);
  }
  const used = [
    ...[...expr.matchAll(/\{([^}]*)\}/g)].flatMap((m) => [...m[1]!.matchAll(/([a-z_]+)\s*[=!~]/g)].map((x) => x[1]!)),
    ...[...expr.matchAll(/\bby\s*\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(",").map((x) => x.trim())),
  ];
  for (const l of used) expect(labels.has(l) ? l : `${l} (no such label on ${names.join(", ")})`).toBe(l);
}

describe("monitoring", () => {
  test("off by default: no monitoring.coreos.com object in any configuration", async () => {
    for (const values of [{}, E2B] as Values[]) {
      const objects = await render(values);
      expect(objects.filter((o) => o.apiVersion.startsWith("monitoring.coreos.com/"))).toEqual([]);
    }
  });

  test("on, default: a ServiceMonitor for the apiserver's secure /metrics and the rule set without the proxy alert", async () => {
    const objects = await render(ON);
    expect(objects).toHaveLength(25); // the default 23 (chart/README.md "Objects") and the two monitoring objects
    const sm = find(objects, "ServiceMonitor", "sandbox-apiserver");
    expect(sm.metadata.namespace).toBe("sandbox-system");
    expect(sm.spec).toEqual({
      selector: { matchLabels: { "app.kubernetes.io/name": "sandbox-apiserver" } },
      namespaceSelector: { matchNames: ["sandbox-system"] },
      endpoints: [
        {
          port: "https",
          path: "/metrics",
          scheme: "https",
          interval: "30s",
          honorLabels: true,
          bearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
          tlsConfig: {
            serverName: "sandbox-apiserver.sandbox-system.svc",
            ca: { secret: { name: "sandbox-apiserver-serving-certs", key: "ca.crt" } },
          },
        },
      ],
    });
    const alerts = rules(find(objects, "PrometheusRule", "sandbox-operator")).map((r) => r.alert);
    expect(alerts).toEqual(["SandboxNodeInventoryStale", "SandboxWarmPoolEmpty", "SandboxClaimErrors"]);
  });

  test("on, with e2b and proxy TLS: the proxy's ServiceMonitor scrapes its plain-HTTP metrics port, and the proxy alert joins", async () => {
    const objects = await render(merge(E2B, ON, at("envdProxy.tlsSecretName", "w"), at("monitoring.serviceMonitor.labels", { release: "kube-prometheus" })));
    expect(objects).toHaveLength(33); // the e2b render of 30 (chart/README.md "Objects"), the two ServiceMonitors and the rule
    const sm = find(objects, "ServiceMonitor", "sandbox-envd-proxy");
    expect(sm.metadata.labels?.release).toBe("kube-prometheus");
    expect((sm.spec as { endpoints: unknown }).endpoints).toEqual([{ port: "metrics", path: "/metrics", scheme: "http", interval: "30s" }]);
    // The selector picks the metrics Service only, never the data-plane one; its port targets the container's
    // metrics port, the one --metrics-bind-address listens on.
    const selector = (sm.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    const picked = objects.filter((o) => o.kind === "Service" && Object.entries(selector).every(([k, v]) => o.metadata.labels?.[k] === v));
    expect(picked.map((o) => o.metadata.name)).toEqual(["sandbox-envd-proxy-metrics"]);
    const svc = picked[0]!.spec as { ports: { name: string; port: number; targetPort: string }[] };
    expect(svc.ports).toEqual([{ name: "metrics", port: 9090, targetPort: "metrics", protocol: "TCP" }] as never);
    const c = (find(objects, "Deployment", "sandbox-envd-proxy").spec as { template: { spec: { containers: { args: string[]; ports: { name: string; containerPort: number }[] }[] } } }).template.spec.containers[0]!;
    expect(c.ports.find((p) => p.name === "metrics")?.containerPort).toBe(9090);
    expect(c.args).toContain("--metrics-bind-address=:9090");
    const alerts = rules(find(objects, "PrometheusRule", "sandbox-operator")).map((r) => r.alert);
    expect(alerts).toContain("SandboxEnvdProxyUpstreamErrors");
  });

  test("with the proxy's metrics port at 0 there is no proxy ServiceMonitor", async () => {
    const objects = await render(merge(E2B, ON, at("envdProxy.metricsPort", 0)));
    expect(objects.filter((o) => o.kind === "ServiceMonitor").map((o) => o.metadata.name)).toEqual(["sandbox-apiserver"]);
  });

  test("without the driver there is no warm-pool alert", async () => {
    const objects = await render(merge(ON, at("apiserver.warmPoolDriver", false)));
    expect(rules(find(objects, "PrometheusRule", "sandbox-operator")).map((r) => r.alert)).not.toContain("SandboxWarmPoolEmpty");
  });

  test("durations and thresholds come from values", async () => {
    const objects = await render(
      merge(ON, at("monitoring.prometheusRule", { for: { inventoryStale: "2m" }, claimErrorRatio: 0.2 })),
    );
    const byName = new Map(rules(find(objects, "PrometheusRule", "sandbox-operator")).map((r) => [r.alert, r]));
    expect(byName.get("SandboxNodeInventoryStale")!.for).toBe("2m");
    expect(byName.get("SandboxClaimErrors")!.expr).toContain("> 0.2");
  });

  test("every apiserver alert reads series and labels sandbox-apiserver exports", async () => {
    const series = exported(new ApiserverMetrics().registry);
    const objects = await render(ON);
    for (const r of rules(find(objects, "PrometheusRule", "sandbox-operator"))) {
      checkExpr(r.expr, series);
      expect(r.labels.severity).toBe("warning");
      expect(r.annotations.summary).toContain("{{");
      expect(r.annotations.description!.length).toBeGreaterThan(20);
    }
  });

  test("the proxy alert reads series and labels sandbox-envd-proxy exports", async () => {
    const series = exported(new RelayMetrics().registry);
    const objects = await render(merge(E2B, ON));
    const proxy = rules(find(objects, "PrometheusRule", "sandbox-operator")).filter((r) => r.alert === "SandboxEnvdProxyUpstreamErrors");
    expect(proxy).toHaveLength(1);
    checkExpr(proxy[0]!.expr, series);
  });
});
