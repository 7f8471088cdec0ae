// Which sandbox and guest port a request names (docs/envd-relay.md "Routing"): the `E2b-Sandbox-Id` /
// `E2b-Sandbox-Port` headers when the id header is present (the Host is then not looked at), else the Host
// `{port}-{sandboxID}.{domain}`. Pure functions: fast-check properties cover them.

export interface Route {
  /** The id as the client spelled it, lowercased when it came from the Host. */
  id: string;
  port: number;
  via: "header" | "host";
}

/** Port text: trimmed, unsigned base-10, 1–65535; leading zeros accepted; no sign. */
export function parsePort(text: string | null | undefined): number | undefined {
  const t = (text ?? "").trim();
  if (!/^[0-9]{1,10}$/.test(t)) return undefined;
  const n = Number(t);
  return n >= 1 && n <= 65535 ? n : undefined;
}

/** `host[:port]` -> host, lowercased, without the port (IPv6 brackets kept intact). */
export function hostWithoutPort(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith("[")) {
    const close = h.indexOf("]");
    return close >= 0 ? h.slice(0, close + 1) : h;
  }
  const colon = h.lastIndexOf(":");
  return colon >= 0 && h.indexOf(":") === colon ? h.slice(0, colon) : h;
}

/** `{port}-{id}.{domain}` -> route, or undefined. The label is split at its FIRST `-` (ids contain hyphens). */
export function routeFromHost(host: string, domain: string): Route | undefined {
  const h = hostWithoutPort(host);
  const d = domain.trim().toLowerCase().replace(/^\.+|\.+$/g, "");
  if (d === "" || !h.endsWith(`.${d}`)) return undefined;
  const label = h.slice(0, h.length - d.length - 1);
  if (label === "" || label.includes(".")) return undefined;
  const dash = label.indexOf("-");
  if (dash <= 0) return undefined;
  const port = parsePort(label.slice(0, dash));
  const id = label.slice(dash + 1);
  if (port === undefined || id === "") return undefined;
  return { id, port, via: "host" };
}

export type RouteResult = { ok: true; route: Route } | { ok: false; namesSandbox: boolean };

/**
 * The route of a request. `namesSandbox` on failure says whether the request tried to name a sandbox (an id
 * header, or a host under the domain): only a request that names none may be answered by the proxy's own
 * /healthz and /metrics.
 */
export function routeRequest(headers: { get(name: string): string | null }, host: string, domain: string): RouteResult {
  const headerId = (headers.get("e2b-sandbox-id") ?? "").trim();
  if (headerId !== "") {
    const port = parsePort(headers.get("e2b-sandbox-port"));
    return port === undefined ? { ok: false, namesSandbox: true } : { ok: true, route: { id: headerId, port, via: "header" } };
  }
  const r = routeFromHost(host, domain);
  if (r) return { ok: true, route: r };
  const h = hostWithoutPort(host);
  const d = domain.trim().toLowerCase();
  return { ok: false, namesSandbox: d !== "" && h.endsWith(`.${d}`) };
}

const ENVD_INTERNAL = new Set(["/init", "/freeze", "/unfreeze", "/fsfreeze", "/fsthaw", "/collapse"]);

/** "/" + the path's segments with empty and "." ones dropped and ".." applied, lowercased. */
function normalisedPath(path: string): string {
  // Already normal (no empty, dot or trailing segment): the common path costs no split and join.
  if (path.charCodeAt(0) === 0x2f && !path.includes(".") && !path.includes("//") && (path.length === 1 || !path.endsWith("/"))) return path.toLowerCase();
  const out: string[] = [];
  for (const seg of path.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  return `/${out.join("/")}`.toLowerCase();
}

export type EnvdPathVerdict = "internal" | "undecodable" | "relayable";

/**
 * Whether a request path may reach the guest: envd paths only the control plane may call are "internal", compared
 * both as sent and percent-decoded (the guest's router decodes `/%69nit` to `/init`), after dropping empty and dot
 * segments, case-insensitively. A path whose escapes do not decode (`%zz`, invalid UTF-8) is "undecodable": what
 * the guest would make of it cannot be known, so it is refused.
 */
export function envdPathVerdict(pathname: string): EnvdPathVerdict {
  if (ENVD_INTERNAL.has(normalisedPath(pathname))) return "internal";
  if (!pathname.includes("%")) return "relayable";
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return "undecodable";
  }
  return ENVD_INTERNAL.has(normalisedPath(decoded)) ? "internal" : "relayable";
}

/** envd paths only the control plane may call (see envdPathVerdict; an undecodable path counts as one). */
export function isEnvdInternalPath(pathname: string): boolean {
  return envdPathVerdict(pathname) !== "relayable";
}

/** A signed envd file URL (port 49983, `/files`, GET or POST, non-empty `signature`): no X-Access-Token needed. */
export function isSignedFileUrl(port: number, method: string, url: URL): boolean {
  return port === 49983 && url.pathname === "/files" && (method === "GET" || method === "POST") && (url.searchParams.get("signature") ?? "") !== "";
}
