// Discovery documents (docs/api.md "Identity and discovery"): /apis, /apis/agents.x-k8s.io and the resource list of
// agents.x-k8s.io/v1beta1 with the five entries. Aggregated discovery (apidiscovery.k8s.io/v2) is answered too, so
// the aggregator's discovery merge needs no legacy round trips.
import { API_VERSION, GROUP, KIND, RESOURCE, VERSION } from "../sandboxes/index.ts";

export const SUBRESOURCES = [
  { name: "pause", kind: "SandboxPauseOptions" },
  { name: "resume", kind: "SandboxResumeOptions" },
  { name: "fork", kind: "SandboxForkOptions" },
  { name: "snapshot", kind: "SandboxSnapshotOptions" },
] as const;

// patch and update change spec.operatingMode only (sandboxes/operating-mode.ts; issue 28 item 3).
export const SANDBOX_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"];

const groupVersion = { groupVersion: API_VERSION, version: VERSION };

export function apiGroup() {
  return { kind: "APIGroup", apiVersion: "v1", name: GROUP, versions: [groupVersion], preferredVersion: groupVersion };
}

export function apiGroupList() {
  const { kind: _k, apiVersion: _a, ...group } = apiGroup();
  return { kind: "APIGroupList", apiVersion: "v1", groups: [group] };
}

export function apiResourceList() {
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: API_VERSION,
    resources: [
      { name: RESOURCE, singularName: "sandbox", namespaced: true, kind: KIND, verbs: SANDBOX_VERBS },
      ...SUBRESOURCES.map((s) => ({ name: `${RESOURCE}/${s.name}`, singularName: "", namespaced: true, kind: s.kind, verbs: ["create"] })),
    ],
  };
}

export const AGGREGATED_DISCOVERY_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/** The apidiscovery.k8s.io/v2 document for /apis: one group, one version, the resource and its subresources. */
export function aggregatedDiscovery() {
  return {
    kind: "APIGroupDiscoveryList",
    apiVersion: "apidiscovery.k8s.io/v2",
    metadata: {},
    items: [
      {
        metadata: { name: GROUP },
        versions: [
          {
            version: VERSION,
            freshness: "Current",
            resources: [
              {
                resource: RESOURCE,
                responseKind: { group: GROUP, version: VERSION, kind: KIND },
                scope: "Namespaced",
                singularResource: "sandbox",
                verbs: SANDBOX_VERBS,
                subresources: SUBRESOURCES.map((s) => ({
                  subresource: s.name,
                  responseKind: { group: GROUP, version: VERSION, kind: s.kind },
                  verbs: ["create"],
                })),
              },
            ],
          },
        ],
      },
    ],
  };
}

/** Whether an Accept header asks for aggregated discovery v2 (the aggregator and kubectl do, with a fallback). */
export function wantsAggregatedDiscovery(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept.split(",").some((part) => {
    const p = part.replace(/\s+/g, "").toLowerCase();
    return p.includes("g=apidiscovery.k8s.io") && /(^|;)v=v2(;|$)/.test(p) && p.includes("as=apigroupdiscoverylist");
  });
}
