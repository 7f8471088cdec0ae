// The real helm (tests/kube/peers.ts builds it) run against chart/: renders with values written to a file (exact
// YAML types, no --set parsing surprises), the failures helm reports, and small lookups over rendered objects.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import { helmBinary } from "#tests/kube/peers.ts";
import { run, type RunResult } from "#tests/support/run.ts";

export const root = join(import.meta.dir, "..", "..", "..");
export const chartDir = join(root, "chart");
export const NAMESPACE = "sandbox-system";

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

export type HelmRun = RunResult;

export type Values = Record<string, unknown>;

/** The values every e2b render needs (seed 003's five, with the envd secret from an existing Secret). */
export const E2B: Values = {
  apiserver: {
    e2b: {
      enabled: true,
      domain: "sandbox.example.com",
      apiKeySecret: { name: "e2b-api-keys" },
      envdSecret: { secretName: "e2b-envd-secret" },
    },
    sandboxdToken: { secretName: "sandboxd-token" },
  },
};

/** A SandboxTemplate and a SandboxWarmPool on it in namespace `team`, as a warm-pool driver finds them. */
export const POOL_FIXTURES = [
  {
    apiVersion: "extensions.agents.x-k8s.io/v1beta1",
    kind: "SandboxTemplate",
    metadata: { name: "python", namespace: "team" },
    spec: { podTemplate: { spec: { containers: [{ name: "main", image: "python:3.12" }] } } },
  },
  {
    apiVersion: "extensions.agents.x-k8s.io/v1beta1",
    kind: "SandboxWarmPool",
    metadata: { name: "py", namespace: "team" },
    spec: { replicas: 2, sandboxTemplateRef: { name: "python" } },
  },
];

/** Deep merge of plain objects; later wins. */
export function merge(...layers: Values[]): Values {
  const out: Values = {};
  for (const layer of layers) {
    for (const [k, v] of Object.entries(layer)) {
      const prev = out[k];
      out[k] = isPlain(v) && isPlain(prev) ? merge(prev, v) : v;
    }
  }
  return out;
}

function isPlain(v: unknown): v is Values {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `{a: {b: 1}}` from `"a.b", 1`. */
export function at(path: string, value: unknown): Values {
  return path
    .split(".")
    .reverse()
    .reduce<unknown>((inner, key) => ({ [key]: inner }), value) as Values;
}

/** Runs helm with the given arguments; values (if any) go through a temporary `-f` file. */
export async function helm(args: string[], values?: Values): Promise<HelmRun> {
  const bin = await helmBinary();
  const dir = mkdtempSync(join(tmpdir(), "chart-test-"));
  try {
    const extra: string[] = [];
    if (values) {
      const file = join(dir, "values.yaml");
      writeFileSync(file, stringify(values));
      extra.push("-f", file);
    }
    // A private helm home: no repositories, plugins or cache of the machine's user leak in.
    const env = {
      ...process.env,
      HELM_CACHE_HOME: join(dir, "cache"),
      HELM_CONFIG_HOME: join(dir, "config"),
      HELM_DATA_HOME: join(dir, "data"),
    };
    return await run([bin, ...args, ...extra], { cwd: root, env });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface RenderOptions {
  includeCrds?: boolean;
  release?: string;
  namespace?: string;
}

/** `helm template` and its objects; throws with helm's stderr when the render fails. */
export async function render(values: Values = {}, o: RenderOptions = {}): Promise<KubeObject[]> {
  const r = await template(values, o);
  if (r.code !== 0) throw new Error(`helm template failed (${r.code}):\n${r.stderr}`);
  return parseObjects(r.stdout);
}

export function template(values: Values = {}, o: RenderOptions = {}): Promise<HelmRun> {
  const args = ["template", o.release ?? "r", chartDir, "--namespace", o.namespace ?? NAMESPACE];
  if (o.includeCrds ?? true) args.push("--include-crds");
  return helm(args, values);
}

export function parseObjects(yaml: string): KubeObject[] {
  const out: KubeObject[] = [];
  for (const doc of parseAllDocuments(yaml)) {
    if (doc.errors.length) throw new Error(`rendered YAML does not parse: ${doc.errors[0]!.message}`);
    const obj = doc.toJS() as KubeObject | null;
    if (obj) out.push(obj);
  }
  return out;
}

/** "Kind namespace/name" (cluster-scoped: "Kind name"), the identity the chart's object tables list. */
export function identity(o: KubeObject): string {
  return o.metadata.namespace ? `${o.kind} ${o.metadata.namespace}/${o.metadata.name}` : `${o.kind} ${o.metadata.name}`;
}

export function find(objects: KubeObject[], kind: string, name: string): KubeObject {
  const hit = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  if (hit.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${hit.length}`);
  return hit[0]!;
}

export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string } } }[];
  ports?: { name: string; containerPort: number; protocol?: string }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  resources?: unknown;
  securityContext?: Record<string, unknown>;
}

export interface Probe {
  httpGet: { path: string; port: string; scheme: string };
  initialDelaySeconds: number;
  periodSeconds: number;
}

export interface PodSpec {
  serviceAccountName: string;
  securityContext?: Record<string, unknown>;
  topologySpreadConstraints?: unknown[];
  containers: Container[];
  volumes?: {
    name: string;
    secret?: { secretName: string };
    configMap?: { name: string };
    emptyDir?: { sizeLimit?: string };
    persistentVolumeClaim?: { claimName: string };
  }[];
}

export interface DeploymentShape {
  replicas: number;
  selector: { matchLabels: Record<string, string> };
  template: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: PodSpec };
}

export function deployment(objects: KubeObject[], name: string): DeploymentShape {
  return find(objects, "Deployment", name).spec as DeploymentShape;
}

export function container(objects: KubeObject[], name: string): Container {
  const c = deployment(objects, name).template.spec.containers;
  if (c.length !== 1) throw new Error(`Deployment ${name} has ${c.length} containers`);
  return c[0]!;
}

/** Values of the environment a container gets, with fieldRefs resolved as the kubelet would for this pod. */
export function containerEnv(c: Container, namespace = NAMESPACE): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === "metadata.namespace") env[e.name] = namespace;
    // A Secret's value is unknown at render time; a placeholder naming it stands in for what the kubelet injects.
    else if (e.valueFrom?.secretKeyRef) env[e.name] = `<secret ${e.valueFrom.secretKeyRef.name}/${e.valueFrom.secretKeyRef.key}>`;
    else throw new Error(`env ${e.name}: no resolver for ${JSON.stringify(e.valueFrom)}`);
  }
  return env;
}
