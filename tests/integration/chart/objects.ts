// The chart's object sets as seed 003 fixes them, every object the chart renders beyond them and why, and the
// renders the docs count (chart/README.md "Objects", docs/decisions.md "chart-objects-beyond-seed"). Identities are
// those of helm.ts's identity(): "Kind namespace/name", or "Kind name" for a cluster-scoped object.
import { E2B, NAMESPACE, at, merge, type RenderOptions, type Values } from "./helm.ts";

const NS = NAMESPACE;

/**
 * Seed 003: "The chart's default render is 16 objects" (the CRD, the apiserver's Deployment, Service, ServiceAccount
 * and PodDisruptionBudget, the APIService, the RBAC, the cert-manager chain); "Enabling the e2b surface adds …
 * (22 objects, 23 when the chart renders the envd secret from apiserver.e2b.envdSecret.value)". In chart.md §3.1's
 * order (the CRD first).
 */
export const SEED_003_DEFAULT = [
  "CustomResourceDefinition nodeinventories.sandbox.cocoonstack.io",
  `ServiceAccount ${NS}/sandbox-apiserver`,
  "ClusterRoleBinding sandbox-apiserver:system:auth-delegator",
  "RoleBinding kube-system/sandbox-apiserver-auth-reader",
  "ClusterRole sandbox-apiserver-inventory-reader",
  "ClusterRoleBinding sandbox-apiserver-inventory-reader",
  `Role ${NS}/sandbox-apiserver-leader-election`,
  `RoleBinding ${NS}/sandbox-apiserver-leader-election`,
  `Deployment ${NS}/sandbox-apiserver`,
  `Service ${NS}/sandbox-apiserver`,
  `PodDisruptionBudget ${NS}/sandbox-apiserver`,
  "APIService v1beta1.agents.x-k8s.io",
  `Issuer ${NS}/sandbox-apiserver-selfsigned`,
  `Certificate ${NS}/sandbox-apiserver-ca`,
  `Issuer ${NS}/sandbox-apiserver-ca`,
  `Certificate ${NS}/sandbox-apiserver-serving`,
];

/** Seed 003's e2b additions (chart.md §3.2 rows 17–22): 16 + 6 = 22. */
export const SEED_003_E2B = [
  `Service ${NS}/sandbox-apiserver-e2b`,
  `ServiceAccount ${NS}/sandbox-envd-proxy`,
  "ClusterRole sandbox-envd-proxy-inventory-reader",
  "ClusterRoleBinding sandbox-envd-proxy-inventory-reader",
  `Deployment ${NS}/sandbox-envd-proxy`,
  `Service ${NS}/sandbox-envd-proxy`,
];

/** Seed 003's 23rd: the envd secret, rendered only from apiserver.e2b.envdSecret.value. */
export const SEED_003_ENVD_SECRET = `Secret ${NS}/sandbox-e2b-envd-secret`;

export interface BeyondSeedObject {
  kind: string;
  name: string;
  /** Namespaced objects go to the release namespace; the others are cluster-scoped. */
  namespaced: boolean;
  /** The smallest of the counted renders that has it: "default" ones are in every render with the warm-pool driver. */
  in: "default" | "e2b";
  /** The value that renders it; the docs' "Rendered when" cell names it. */
  when: string;
  /** Where the object came from; the docs' "Why" cell names it. */
  source: string;
  why: string;
}

/** Every object a counted render has that seed 003 does not list. */
export const BEYOND_SEED: BeyondSeedObject[] = [
  {
    kind: "CustomResourceDefinition",
    name: "nodeinventoryshards.sandbox.cocoonstack.io",
    namespaced: false,
    in: "default",
    when: "always (with --include-crds)",
    source: "issue 29",
    why: "a node at its 2,000-sandbox capacity with the largest e2b metadata is about 9 MiB of rows, past etcd's 1.5 MiB per object; the sharded NodeInventory form spreads them over NodeInventoryShard objects",
  },
  {
    kind: "ValidatingAdmissionPolicy",
    name: "sandbox-apiserver-leader-election",
    namespaced: false,
    in: "default",
    when: "apiserver.warmPoolDriver",
    source: "issue 22",
    why: "RBAC cannot narrow `create leases` by name (a create's URL carries none); the policy refuses a Lease create by the apiserver's ServiceAccount unless it is cocoon-warmpool-driver",
  },
  {
    kind: "ValidatingAdmissionPolicyBinding",
    name: "sandbox-apiserver-leader-election",
    namespaced: false,
    in: "default",
    when: "apiserver.warmPoolDriver",
    source: "issue 22",
    why: "a ValidatingAdmissionPolicy enforces nothing until bound (Deny)",
  },
  {
    kind: "ValidatingAdmissionPolicy",
    name: "sandbox-apiserver-warmpool-annotations",
    namespaced: false,
    in: "default",
    when: "apiserver.warmPoolDriver",
    source: "issue 21",
    why: "the autoscaler's decision is the annotation sandbox.cocoonstack.io/autoscale-status, which needs `patch sandboxwarmpools`; RBAC cannot narrow a patch to one annotation, the policy refuses any other change",
  },
  {
    kind: "ValidatingAdmissionPolicyBinding",
    name: "sandbox-apiserver-warmpool-annotations",
    namespaced: false,
    in: "default",
    when: "apiserver.warmPoolDriver",
    source: "issue 21",
    why: "a ValidatingAdmissionPolicy enforces nothing until bound (Deny)",
  },
  {
    kind: "ValidatingAdmissionPolicy",
    name: "sandbox-template-built-images",
    namespaced: false,
    in: "default",
    when: "apiserver.warmPoolDriver",
    source: "issue 27",
    why: "a SandboxTemplate may name a built template (e2b/<namespace>/<name>) of its own namespace only, never a build step cache entry: the backstop to the warm-pool driver's own check (manifests/template-admission.yaml)",
  },
  {
    kind: "ValidatingAdmissionPolicyBinding",
    name: "sandbox-template-built-images",
    namespaced: false,
    in: "default",
    when: "apiserver.warmPoolDriver",
    source: "issue 27",
    why: "a ValidatingAdmissionPolicy enforces nothing until bound (Deny)",
  },
  {
    kind: "Service",
    name: "sandbox-envd-proxy-metrics",
    namespaced: true,
    in: "e2b",
    when: "envdProxy.metricsPort",
    source: "second security review",
    why: "the proxy's /metrics (fleet-wide relay counts) off the data-plane Service, which the wildcard host reaches and an operator may expose",
  },
];

export const beyondIdentity = (o: BeyondSeedObject): string => (o.namespaced ? `${o.kind} ${NS}/${o.name}` : `${o.kind} ${o.name}`);

const BEYOND_DEFAULT = BEYOND_SEED.filter((o) => o.in === "default").map(beyondIdentity);
const BEYOND_ALL = BEYOND_SEED.map(beyondIdentity);

const CERT_MANAGER = (o: string) => /^(Issuer|Certificate) /.test(o);
const CRD = (o: string) => o.startsWith("CustomResourceDefinition ");
const DRIVER_ONLY = (o: string) => o.includes("-leader-election") || o.includes("-warmpool-annotations") || o.includes("sandbox-template-built-images");

export const NO_CERT_MANAGER: Values = at("certManager", { enabled: false, caBundle: "Zm9v" });
export const NO_DRIVER: Values = at("apiserver.warmPoolDriver", false);

/** One row of the docs' counts table: a render, what seed 003 has of it and what the chart adds. */
export interface CountedRender {
  /** The row's first cell as the docs write it, backticks removed. */
  label: string;
  values: Values;
  options?: RenderOptions;
  seed: string[];
  beyond: string[];
}

const drop = (list: string[], ...rules: ((o: string) => boolean)[]) => list.filter((o) => !rules.some((r) => r(o)));

export const COUNTED_RENDERS: CountedRender[] = [
  { label: "default", values: {}, seed: SEED_003_DEFAULT, beyond: BEYOND_DEFAULT },
  {
    label: "default without --include-crds",
    values: {},
    options: { includeCrds: false },
    seed: SEED_003_DEFAULT.filter((o) => !CRD(o)),
    beyond: drop(BEYOND_DEFAULT, CRD),
  },
  { label: "apiserver.e2b.enabled (with the values it needs)", values: E2B, seed: [...SEED_003_DEFAULT, ...SEED_003_E2B], beyond: BEYOND_ALL },
  {
    label: "apiserver.e2b.enabled and apiserver.e2b.envdSecret.value",
    values: merge(E2B, at("apiserver.e2b.envdSecret", { value: "v", secretName: "" })),
    seed: [...SEED_003_DEFAULT, ...SEED_003_E2B, SEED_003_ENVD_SECRET],
    beyond: BEYOND_ALL,
  },
  { label: "apiserver.warmPoolDriver=false", values: NO_DRIVER, seed: drop(SEED_003_DEFAULT, DRIVER_ONLY), beyond: drop(BEYOND_DEFAULT, DRIVER_ONLY) },
  {
    label: "certManager.enabled=false with certManager.caBundle",
    values: NO_CERT_MANAGER,
    seed: drop(SEED_003_DEFAULT, CERT_MANAGER),
    beyond: BEYOND_DEFAULT,
  },
  { label: "both of the last two", values: merge(NO_DRIVER, NO_CERT_MANAGER), seed: drop(SEED_003_DEFAULT, DRIVER_ONLY, CERT_MANAGER), beyond: drop(BEYOND_DEFAULT, DRIVER_ONLY, CERT_MANAGER) },
];
