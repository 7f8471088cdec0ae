// What a request asks to do, in authorization terms (kube-apiserver's RequestInfo): a resource request under
// agents.x-k8s.io/v1beta1 (verb, namespace, resource, subresource, name), or a non-resource path with the
// lower-cased HTTP method as its verb (discovery, /openapi, /version, /metrics, /debug/pprof).
import { ApiError } from "../api/index.ts";
import { GROUP, RESOURCE, VERSION } from "../sandboxes/index.ts";

export type RequestInfo =
  | { kind: "resource"; verb: string; namespace: string; resource: string; subresource: string; name: string; path: string }
  | { kind: "nonResource"; verb: string; path: string };

const PREFIX = `/apis/${GROUP}/${VERSION}/`;

export function requestInfo(method: string, url: URL): RequestInfo {
  const path = url.pathname;
  const m = method.toUpperCase();
  if (!path.startsWith(PREFIX)) return { kind: "nonResource", verb: m.toLowerCase(), path };
  const parts = path.slice(PREFIX.length).split("/").filter(Boolean).map(decodeSegment);
  let namespace = "";
  if (parts[0] === "namespaces" && parts.length >= 3) {
    namespace = parts[1]!;
    parts.splice(0, 2);
  }
  const [resource = "", name = "", subresource = ""] = parts;
  const collection = name === "";
  const watch = url.searchParams.get("watch") === "true" || url.searchParams.get("watch") === "1";
  const verb =
    m === "GET" || m === "HEAD"
      ? collection
        ? watch
          ? "watch"
          : "list"
        : "get"
      : m === "POST"
        ? "create"
        : m === "PUT"
          ? "update"
          : m === "PATCH"
            ? "patch"
            : m === "DELETE"
              ? collection
                ? "deletecollection"
                : "delete"
              : m.toLowerCase();
  return { kind: "resource", verb, namespace, resource, subresource, name, path };
}

/** A path segment, unescaped; a bad `%` escape is the client's error (400), answered before authentication. */
function decodeSegment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new ApiError(400, `the request path has an invalid escape in segment "${s.slice(0, 64)}"`, "BadRequest");
  }
}

/** kube-apiserver's Forbidden wording for a denied request. */
export function forbiddenMessage(user: string, info: RequestInfo, reason?: string): string {
  const why = reason ? `: ${reason}` : "";
  if (info.kind === "nonResource") return `forbidden: User "${user}" cannot ${info.verb} path "${info.path}"${why}`;
  const res = info.subresource ? `${info.resource}/${info.subresource}` : info.resource;
  const object = `${info.resource || RESOURCE}.${GROUP}${info.name ? ` "${info.name}"` : ""}`;
  const scope = info.namespace ? `in the namespace "${info.namespace}"` : "at the cluster scope";
  return `${object} is forbidden: User "${user}" cannot ${info.verb} resource "${res}" in API group "${GROUP}" ${scope}${why}`;
}
