// The proxy to reach the apiserver through, chosen from the environment the way client-go does (Go's
// http.ProxyFromEnvironment): HTTPS_PROXY (or https_proxy) for an https server, HTTP_PROXY (or http_proxy) for
// http, unless NO_PROXY (or no_proxy) exempts the host. localhost and loopback addresses are never proxied.
// NO_PROXY entries, comma-separated: `*` (everything), an IP, a CIDR, or a domain name that matches itself and its
// subdomains (a leading `.` matches subdomains only); each may carry `:port` to match that port only.
import { BlockList, isIP } from "node:net";

export type ProxyEnv = Record<string, string | undefined>;

const first = (env: ProxyEnv, ...names: string[]) => names.map((n) => env[n]).find((v) => v !== undefined && v !== "");

/** The proxy URL for a request to `target`, or undefined to connect directly. */
export function proxyForUrl(target: string, env: ProxyEnv): string | undefined {
  const url = new URL(target);
  const raw = url.protocol === "https:" ? first(env, "HTTPS_PROXY", "https_proxy") : first(env, "HTTP_PROXY", "http_proxy");
  if (!raw) return undefined;
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  if (host === "localhost" || isLoopback(host)) return undefined;
  if (exempt(host, port, first(env, "NO_PROXY", "no_proxy") ?? "")) return undefined;
  // Go accepts a bare host:port and reads it as http://.
  return raw.includes("://") ? raw : `http://${raw}`;
}

function isLoopback(host: string): boolean {
  const v = isIP(host);
  if (v === 4) return host.startsWith("127.");
  if (v === 6) return host === "::1";
  return false;
}

function exempt(host: string, port: string, noProxy: string): boolean {
  for (let entry of noProxy.split(",").map((e) => e.trim().toLowerCase()).filter(Boolean)) {
    if (entry === "*") return true;
    // CIDR first: its "/" would otherwise read as part of a name.
    if (entry.includes("/")) {
      const [net, bits] = entry.split("/") as [string, string];
      const family = isIP(net);
      if (family && isIP(host) === family) {
        const list = new BlockList();
        list.addSubnet(net, Number(bits), family === 4 ? "ipv4" : "ipv6");
        if (list.check(host, family === 4 ? "ipv4" : "ipv6")) return true;
      }
      continue;
    }
    let entryPort: string | undefined;
    const m = /^(.*):(\d+)$/.exec(entry);
    if (m && !(isIP(entry) === 6)) {
      entry = m[1]!;
      entryPort = m[2];
    }
    entry = entry.replace(/^\[|\]$/g, "");
    if (entryPort && entryPort !== port) continue;
    if (isIP(entry)) {
      if (entry === host) return true;
      continue;
    }
    if (entry.startsWith(".")) {
      if (host.endsWith(entry)) return true;
      continue;
    }
    if (host === entry || host.endsWith(`.${entry}`)) return true;
  }
  return false;
}
