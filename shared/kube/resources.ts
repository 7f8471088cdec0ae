// Which REST path a kind lives at. The well-known resources are constants; `resourceForKind` guesses the plural the
// way the apiserver's default RESTMapper does, for kinds we have no discovery for (our own CRDs are regular).

export interface ResourceRef {
  /** "" for the core group. */
  group: string;
  version: string;
  /** Lowercase plural, as in the URL. */
  resource: string;
  namespaced: boolean;
}

const core = (resource: string, namespaced: boolean): ResourceRef => ({ group: "", version: "v1", resource, namespaced });

export const Pods = core("pods", true);
export const Nodes = core("nodes", false);
export const Events = core("events", true);
export const Namespaces = core("namespaces", false);
export const ServiceAccounts = core("serviceaccounts", true);
export const ConfigMaps = core("configmaps", true);
export const Secrets = core("secrets", true);
export const Services = core("services", true);
export const Endpoints = core("endpoints", true);
export const Leases: ResourceRef = { group: "coordination.k8s.io", version: "v1", resource: "leases", namespaced: true };
export const EventsV1: ResourceRef = { group: "events.k8s.io", version: "v1", resource: "events", namespaced: true };
export const CustomResourceDefinitions: ResourceRef = {
  group: "apiextensions.k8s.io",
  version: "v1",
  resource: "customresourcedefinitions",
  namespaced: false,
};
export const APIServices: ResourceRef = {
  group: "apiregistration.k8s.io",
  version: "v1",
  resource: "apiservices",
  namespaced: false,
};
export const TokenReviews: ResourceRef = {
  group: "authentication.k8s.io",
  version: "v1",
  resource: "tokenreviews",
  namespaced: false,
};
export const SubjectAccessReviews: ResourceRef = {
  group: "authorization.k8s.io",
  version: "v1",
  resource: "subjectaccessreviews",
  namespaced: false,
};

/** Lowercase plural of a kind: ends s,x,z,ch,sh → +es; consonant+y → ies; else +s (the default RESTMapper's rule). */
export function pluralize(kind: string): string {
  const k = kind.toLowerCase();
  if (/(s|x|z|ch|sh)$/.test(k)) return `${k}es`;
  if (/[^aeiou]y$/.test(k)) return `${k.slice(0, -1)}ies`;
  return `${k}s`;
}

/** apiVersion "v1" is the core group; "group/version" otherwise. Undefined for an empty kind or a malformed apiVersion. */
export function resourceForKind(apiVersion: string, kind: string, namespaced: boolean): ResourceRef | undefined {
  if (!kind) return undefined;
  const parts = apiVersion.split("/");
  let group: string;
  let version: string;
  if (parts.length === 1) [group, version] = ["", parts[0]!];
  else if (parts.length === 2) [group, version] = [parts[0]!, parts[1]!];
  else return undefined;
  if (!version || (parts.length === 2 && !group)) return undefined;
  return { group, version, resource: pluralize(kind), namespaced };
}

/**
 * The URL path of a collection or of one object: /api/v1/... for core, /apis/group/version/... otherwise.
 * A namespaced resource without a namespace addresses all namespaces (list and watch only).
 */
export function resourcePath(res: ResourceRef, o: { namespace?: string; name?: string; subresource?: string } = {}): string {
  let p = res.group ? `/apis/${res.group}/${res.version}` : `/api/${res.version}`;
  if (res.namespaced && o.namespace) p += `/namespaces/${encodeURIComponent(o.namespace)}`;
  p += `/${res.resource}`;
  if (o.name !== undefined) {
    if (!o.name) throw new Error(`empty object name for ${res.resource}`);
    p += `/${encodeURIComponent(o.name)}`;
  }
  if (o.subresource) {
    if (o.name === undefined) throw new Error(`subresource ${o.subresource} needs an object name`);
    p += `/${o.subresource}`;
  }
  return p;
}
