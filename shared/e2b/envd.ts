// The e2b surface's own calls to a sandbox's envd (docs/e2b.md "envd initialisation"): through the node's ports
// relay to guest port 49983, opened with the ROOT token so it stays passive (never wakes the sandbox, never counts
// as activity). HTTP/1.1, Host `envd`.
import { exchangeOverTunnel, type SmallReply } from "../relay/index.ts";

export { ENVD_PORT } from "../envd-token/index.ts";
import { ENVD_PORT } from "../envd-token/index.ts";
export const INIT_TIMEOUT_MS = 5_000;
export const METRICS_TIMEOUT_MS = 2_000;
export const METRICS_MAX_BYTES = 64 * 1024;

/** The proxy environment a relay-routed (egress lane) guest needs, set beneath the caller's own envVars. */
export const RELAY_PROXY_ENV: Readonly<Record<string, string>> = {
  http_proxy: "http://127.0.0.1:3128",
  https_proxy: "http://127.0.0.1:3128",
  no_proxy: "localhost,127.0.0.1,::1,169.254.169.254",
};

export interface EnvdTarget {
  address: string;
  claimId: string;
  rootToken: string;
}

export async function envdCall(
  t: EnvdTarget,
  r: { method: string; path: string; headers?: Record<string, string>; body?: unknown; timeoutMs: number; maxBytes?: number },
): Promise<SmallReply> {
  const body = r.body === undefined ? undefined : JSON.stringify(r.body);
  return exchangeOverTunnel({ address: t.address, claimId: t.claimId, port: ENVD_PORT, token: t.rootToken }, {
    method: r.method,
    path: r.path,
    headers: { host: "envd", ...(body === undefined ? {} : { "content-type": "application/json" }), ...r.headers },
    body,
    timeoutMs: r.timeoutMs,
    maxBytes: r.maxBytes ?? 64 * 1024,
  });
}

export interface InitBody {
  accessToken: string;
  envVars?: Record<string, string>;
  defaultUser?: string;
  defaultWorkdir?: string;
  timestamp: string;
}

/** envd `POST /init`, presenting `currentToken` when envd already holds one; anything but 204 (or a transport failure) throws. */
export async function initEnvd(t: EnvdTarget, body: InitBody, currentToken?: string): Promise<void> {
  const headers = currentToken === undefined ? undefined : { "x-access-token": currentToken };
  const reply = await envdCall(t, { method: "POST", path: "/init", ...(headers ? { headers } : {}), body, timeoutMs: INIT_TIMEOUT_MS });
  if (reply.status !== 204 && reply.status !== 200) throw new Error(`envd /init answered ${reply.status}`);
}
