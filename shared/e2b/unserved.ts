// The routes of e2b's public API this server does not serve (docs/e2b-routes.md lists every operation and which are
// served): each answers 501 `{code, message}` naming the request, e2b's operation and what to do instead, whatever
// its path parameters, never a 404 "no route" (which the SDKs read as "that secret / volume / sandbox does not
// exist") and never a 401 for a credential this server does not issue. Whole families this server has no part of
// (secrets, volumes, volume content, teams, API keys, access tokens, nodes, admin) answer 501 on any method and any
// path below them, so a newer SDK's call there is refused in words too.
//
// Authentication follows e2b's spec for the operation: a route e2b authenticates with X-API-Key answers its 501
// behind our key check (a keyless caller learns nothing, not even whether builds are on); one e2b authenticates with
// something we never issue (a dashboard bearer token, an admin token, a volume's own token) answers 501 to anyone,
// since no key of ours could be presented for it.

/** What the caller should do instead of a route this server does not serve. */
const INSTEAD = {
  builds: "the operator turns template builds on with --e2b-builds and a build store (docs/e2b.md \"Builds\")",
  buildV3: "build with POST /v3/templates and POST /v2/templates/{templateID}/builds/{buildID} (Template.build of the current SDKs), served under --e2b-builds",
  buildLogs: "read a build's log lines from GET /templates/{templateID}/builds/{buildID}/status (its logEntries, paged by logsOffset)",
  teams: "a tenant here is a namespace, named by its API key in the operator's key file (--e2b-api-key-file); per-namespace usage is on the operator's metrics endpoint (e2b_namespace_* series)",
  keys: "API keys are lines of the operator's key file (--e2b-api-key-file), one key and its namespace per line; ask the operator for one",
  nodes: "nodes are the operator's: Kubernetes Nodes and NodeInventory objects (kubectl get nodes, kubectl get nodeinventories), or the mesh's node list",
  adminKill: "an operator deletes a namespace's sandboxes through Kubernetes (kubectl delete sandboxes -n <namespace> --all); a tenant kills its own with DELETE /sandboxes/{sandboxID}",
  adminCounts: "per-namespace counts are the e2b_namespace_sandboxes series on the operator's metrics endpoint",
  adminBuilds: "a build ends by itself at --e2b-build-timeout",
  admin: "administration here is the operator's, through Kubernetes and the process's flags and files (docs/e2b.md)",
  volumes: "volumes are not offered: a sandbox's files live on its own disk (the files API through envd); keep them across sandboxes with a snapshot (POST /sandboxes/{sandboxID}/snapshots) or storage of your own",
  secrets: "secrets are not stored here: secret injection is the node's guarded-egress policy, set by the operator per pool and tenant; a value the sandbox may read can be passed in envs at create",
} as const;

type Auth = "api-key" | "none";

export interface UnservedOperation {
  method: string;
  /** e2b's path, `{param}` syntax. */
  path: string;
  /** What the operation does, in a few words. */
  what: string;
  instead: string;
  /** How e2b authenticates it: "api-key" answers the 501 behind our key check, "none" to anyone. */
  auth: Auth;
  /** A build route: served when a build module is mounted (--e2b-builds), else 501. */
  build?: true;
}

/** Every operation of e2b's public API (docs/e2b-routes.md) that this server does not serve. */
export const UNSERVED_OPERATIONS: readonly UnservedOperation[] = [
  { method: "GET", path: "/teams", what: "listing teams", instead: INSTEAD.teams, auth: "none" },
  { method: "GET", path: "/teams/{teamID}/metrics", what: "team metrics", instead: INSTEAD.teams, auth: "api-key" },
  { method: "GET", path: "/teams/{teamID}/metrics/max", what: "team metric maxima", instead: INSTEAD.teams, auth: "api-key" },
  { method: "POST", path: "/v3/templates", what: "template builds", instead: INSTEAD.builds, auth: "api-key", build: true },
  { method: "POST", path: "/v2/templates/{templateID}/builds/{buildID}", what: "template builds", instead: INSTEAD.builds, auth: "api-key", build: true },
  { method: "GET", path: "/templates/{templateID}/builds/{buildID}/status", what: "template builds", instead: INSTEAD.builds, auth: "api-key", build: true },
  { method: "GET", path: "/templates/{templateID}/files/{hash}", what: "template build uploads", instead: INSTEAD.builds, auth: "api-key", build: true },
  { method: "GET", path: "/templates/{templateID}/builds/{buildID}/logs", what: "build logs", instead: INSTEAD.buildLogs, auth: "api-key" },
  { method: "POST", path: "/v2/templates", what: "the v2 template build request (deprecated by e2b)", instead: INSTEAD.buildV3, auth: "api-key" },
  { method: "POST", path: "/templates", what: "the v1 template build request (deprecated by e2b)", instead: INSTEAD.buildV3, auth: "none" },
  { method: "POST", path: "/templates/{templateID}", what: "the v1 template rebuild (deprecated by e2b)", instead: INSTEAD.buildV3, auth: "none" },
  { method: "POST", path: "/templates/{templateID}/builds/{buildID}", what: "the v1 build start (deprecated by e2b)", instead: INSTEAD.buildV3, auth: "none" },
  { method: "GET", path: "/nodes", what: "listing nodes", instead: INSTEAD.nodes, auth: "none" },
  { method: "GET", path: "/nodes/{nodeID}", what: "reading a node", instead: INSTEAD.nodes, auth: "none" },
  { method: "POST", path: "/nodes/{nodeID}", what: "changing a node's status", instead: INSTEAD.nodes, auth: "none" },
  { method: "POST", path: "/admin/teams/{teamID}/sandboxes/kill", what: "killing a team's sandboxes", instead: INSTEAD.adminKill, auth: "none" },
  { method: "GET", path: "/admin/sandboxes/running-counts", what: "running counts per team", instead: INSTEAD.adminCounts, auth: "none" },
  { method: "POST", path: "/admin/teams/{teamID}/builds/cancel", what: "cancelling a team's builds", instead: INSTEAD.adminBuilds, auth: "none" },
  { method: "POST", path: "/admin/teams/{teamID}/api-keys", what: "creating a team's API key", instead: INSTEAD.keys, auth: "none" },
  { method: "DELETE", path: "/admin/teams/{teamID}/api-keys/{apiKeyID}", what: "deleting a team's API key", instead: INSTEAD.keys, auth: "none" },
  { method: "POST", path: "/access-tokens", what: "creating an access token", instead: INSTEAD.keys, auth: "none" },
  { method: "DELETE", path: "/access-tokens/{accessTokenID}", what: "deleting an access token", instead: INSTEAD.keys, auth: "none" },
  { method: "GET", path: "/api-keys", what: "listing API keys", instead: INSTEAD.keys, auth: "none" },
  { method: "POST", path: "/api-keys", what: "creating an API key", instead: INSTEAD.keys, auth: "none" },
  { method: "PATCH", path: "/api-keys/{apiKeyID}", what: "renaming an API key", instead: INSTEAD.keys, auth: "none" },
  { method: "DELETE", path: "/api-keys/{apiKeyID}", what: "deleting an API key", instead: INSTEAD.keys, auth: "none" },
  { method: "GET", path: "/volumes", what: "listing volumes", instead: INSTEAD.volumes, auth: "api-key" },
  { method: "POST", path: "/volumes", what: "creating a volume", instead: INSTEAD.volumes, auth: "api-key" },
  { method: "GET", path: "/volumes/{volumeID}", what: "reading a volume", instead: INSTEAD.volumes, auth: "api-key" },
  { method: "DELETE", path: "/volumes/{volumeID}", what: "deleting a volume", instead: INSTEAD.volumes, auth: "api-key" },
  { method: "GET", path: "/volumecontent/{volumeID}/file", what: "reading a volume file", instead: INSTEAD.volumes, auth: "none" },
  { method: "PUT", path: "/volumecontent/{volumeID}/file", what: "writing a volume file", instead: INSTEAD.volumes, auth: "none" },
  { method: "GET", path: "/volumecontent/{volumeID}/dir", what: "listing a volume directory", instead: INSTEAD.volumes, auth: "none" },
  { method: "POST", path: "/volumecontent/{volumeID}/dir", what: "making a volume directory", instead: INSTEAD.volumes, auth: "none" },
  { method: "GET", path: "/volumecontent/{volumeID}/path", what: "reading a volume entry's information", instead: INSTEAD.volumes, auth: "none" },
  { method: "PATCH", path: "/volumecontent/{volumeID}/path", what: "changing a volume entry's owner or mode", instead: INSTEAD.volumes, auth: "none" },
  { method: "DELETE", path: "/volumecontent/{volumeID}/path", what: "removing a volume entry", instead: INSTEAD.volumes, auth: "none" },
  { method: "GET", path: "/secrets", what: "listing secrets", instead: INSTEAD.secrets, auth: "api-key" },
  { method: "POST", path: "/secrets", what: "creating a secret", instead: INSTEAD.secrets, auth: "api-key" },
  { method: "GET", path: "/secrets/{secretID}", what: "reading a secret", instead: INSTEAD.secrets, auth: "api-key" },
  { method: "POST", path: "/secrets/{secretID}", what: "updating a secret", instead: INSTEAD.secrets, auth: "api-key" },
  { method: "DELETE", path: "/secrets/{secretID}", what: "deleting a secret", instead: INSTEAD.secrets, auth: "api-key" },
];

/** Path prefixes whose every method and sub-path is unserved (a route e2b adds there later is refused in words). */
const FAMILIES: ReadonlyArray<{ prefix: string; what: string; instead: string; auth: Auth }> = [
  { prefix: "/secrets", what: "secrets", instead: INSTEAD.secrets, auth: "api-key" },
  { prefix: "/volumes", what: "volumes", instead: INSTEAD.volumes, auth: "api-key" },
  { prefix: "/volumecontent", what: "volume content", instead: INSTEAD.volumes, auth: "none" },
  { prefix: "/teams", what: "teams", instead: INSTEAD.teams, auth: "none" },
  { prefix: "/api-keys", what: "API key management", instead: INSTEAD.keys, auth: "none" },
  { prefix: "/access-tokens", what: "access tokens", instead: INSTEAD.keys, auth: "none" },
  { prefix: "/nodes", what: "node administration", instead: INSTEAD.nodes, auth: "none" },
  { prefix: "/admin", what: "e2b's admin API", instead: INSTEAD.admin, auth: "none" },
];

/** The request's path as echoed in a message: bounded, as sent (percent-encoded, so no control character). */
const MAX_ECHOED_PATH = 200;
const echoed = (path: string) => (path.length > MAX_ECHOED_PATH ? `${path.slice(0, MAX_ECHOED_PATH)}…` : path);

export interface Refusal {
  /** Whether the 501 is answered behind the key check. */
  needsKey: boolean;
  message: string;
}

interface Compiled extends UnservedOperation {
  pattern: RegExp;
}

/** A `{param}` is one non-empty path segment, as the router matches it; a trailing slash is the same route. */
export const pathPattern = (path: string) => new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{\w+\}/g, "[^/]+")}/?$`);
/** The method a route is matched by: HEAD is routed as GET. */
export const routedMethod = (method: string) => (method.toUpperCase() === "HEAD" ? "GET" : method.toUpperCase());

/** The unserved routes of one server: the build routes count only while no build module is mounted. */
export class UnservedRoutes {
  private readonly ops: Compiled[];

  constructor(o: { buildsMounted: boolean }) {
    this.ops = UNSERVED_OPERATIONS.filter((op) => !(op.build && o.buildsMounted)).map((op) => ({ ...op, pattern: pathPattern(op.path) }));
  }

  /**
   * The refusal for a request to an unserved route, or undefined for any other. The caller asks only for a request
   * no served route matches: `POST /templates/{templateID}` (unserved) also matches the served `POST /templates/tags`.
   * `path` is the router's (percent-decoded) path; `shown` gives the request's path as sent, which the message echoes
   * (asked for only when the route is refused).
   */
  match(method: string, path: string, shown: () => string = () => path): Refusal | undefined {
    const m = routedMethod(method);
    const said = () => `${method.toUpperCase()} ${echoed(shown())}`;
    for (const op of this.ops) {
      if (op.method === m && op.pattern.test(path)) {
        return { needsKey: op.auth === "api-key", message: `${said()}: ${op.what} (e2b's ${op.method} ${op.path}) is not served by this server; ${op.instead}` };
      }
    }
    for (const f of FAMILIES) {
      if (path === f.prefix || path.startsWith(`${f.prefix}/`)) {
        return { needsKey: f.auth === "api-key", message: `${said()}: ${f.what} (e2b's ${f.prefix} routes) are not served by this server; ${f.instead}` };
      }
    }
    return undefined;
  }
}
