// Where delegated authentication gets its authorities and header names (docs/serving.md): the flags, and for what
// they leave unset the ConfigMap kube-system/extension-apiserver-authentication that kube-apiserver fills (reading
// it needs the Role extension-apiserver-authentication-reader). As upstream: an unset --client-ca-file takes the
// ConfigMap's client-ca-file; an unset --requestheader-client-ca-file takes the ConfigMap's whole request-header
// set (CA, allowed names, header names). A failed read is fatal unless --authentication-tolerate-lookup-failure.
// The ConfigMap is then watched, and a change is applied to new connections and requests without a restart.
import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import { StartupError } from "#shared/config/index.ts";
import type { KubeClient } from "#shared/kube/index.ts";
import { Informer } from "#shared/kube/index.ts";
import { ConfigMaps } from "#shared/kube/index.ts";
import type { ApiserverConfig } from "../flags.ts";
import type { RequestHeaderConfig } from "./authn.ts";

export const AUTH_CONFIGMAP = { namespace: "kube-system", name: "extension-apiserver-authentication" } as const;

export interface AuthSources {
  clientCaPem: string;
  requestHeaderCaPem: string;
  requestHeader: RequestHeaderConfig;
}

interface ConfigMap {
  data?: Record<string, string>;
}

function readFlagFile(flag: string, path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (e) {
    throw new StartupError(`${flag}: read "${path}": ${(e as Error).message}`, { flag });
  }
}

function jsonList(data: Record<string, string>, key: string): string[] {
  const v = data[key];
  if (!v) return [];
  try {
    const parsed = JSON.parse(v) as unknown;
    return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === "string") : [];
  } catch {
    return [];
  }
}

function fromFlags(config: ApiserverConfig): AuthSources {
  const a = config.authentication;
  return {
    clientCaPem: a.clientCaFile ? readFlagFile("--client-ca-file", a.clientCaFile) : "",
    requestHeaderCaPem: a.requestheaderClientCaFile ? readFlagFile("--requestheader-client-ca-file", a.requestheaderClientCaFile) : "",
    requestHeader: {
      allowedNames: a.requestheaderAllowedNames,
      usernameHeaders: a.requestheaderUsernameHeaders,
      groupHeaders: a.requestheaderGroupHeaders,
      extraHeaderPrefixes: a.requestheaderExtraHeadersPrefix,
    },
  };
}

/** Whether the ConfigMap supplies anything the flags leave unset. */
export function needsLookup(config: ApiserverConfig): boolean {
  const a = config.authentication;
  return !a.skipLookup && (!a.clientCaFile || !a.requestheaderClientCaFile);
}

/** The flags' settings, completed from the ConfigMap's data where the flags leave them unset. */
export function mergeAuthSources(config: ApiserverConfig, flags: AuthSources, data: Record<string, string>): AuthSources {
  const a = config.authentication;
  const out = { ...flags };
  if (!a.clientCaFile) out.clientCaPem = data["client-ca-file"] ?? "";
  if (!a.requestheaderClientCaFile) {
    out.requestHeaderCaPem = data["requestheader-client-ca-file"] ?? "";
    out.requestHeader = {
      allowedNames: jsonList(data, "requestheader-allowed-names"),
      usernameHeaders: jsonList(data, "requestheader-username-headers"),
      groupHeaders: jsonList(data, "requestheader-group-headers"),
      extraHeaderPrefixes: jsonList(data, "requestheader-extra-headers-prefix"),
    };
  }
  return out;
}

export async function loadAuthSources(config: ApiserverConfig, client: KubeClient | undefined, log: Logger): Promise<AuthSources> {
  const a = config.authentication;
  const flags = fromFlags(config);
  if (!needsLookup(config)) return flags;
  let data: Record<string, string>;
  try {
    if (!client) throw new Error("no Kubernetes client for --authentication-kubeconfig");
    data = (await client.get<ConfigMap>(ConfigMaps, AUTH_CONFIGMAP.name, { namespace: AUTH_CONFIGMAP.namespace })).data ?? {};
  } catch (e) {
    const msg =
      `unable to load configmap based request-header-client-ca-file: read ConfigMap ${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name}: ` +
      `${(e as Error).message} (the server's identity needs the Role extension-apiserver-authentication-reader in ${AUTH_CONFIGMAP.namespace})`;
    if (a.tolerateLookupFailure) {
      log.warn({ configMap: `${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name}`, err: (e as Error).message }, "authentication lookup failed; continuing (--authentication-tolerate-lookup-failure): requests without credentials the server can check are anonymous");
      return flags;
    }
    throw new StartupError(msg, { configMap: `${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name}` });
  }
  return mergeAuthSources(config, flags, data);
}

/**
 * Watches the ConfigMap and calls `apply` with the merged settings whenever kube-apiserver (or an operator) changes
 * it, so a rotated front-proxy CA or client CA is honoured without a restart. Returns a stop function.
 */
export function watchAuthSources(config: ApiserverConfig, client: KubeClient, log: Logger, apply: (s: AuthSources) => void): () => Promise<void> {
  const flags = fromFlags(config);
  const informer = new Informer<ConfigMap & { metadata?: { name?: string; namespace?: string } }>(client, ConfigMaps, {
    namespace: AUTH_CONFIGMAP.namespace,
    fieldSelector: `metadata.name=${AUTH_CONFIGMAP.name}`,
    log,
  });
  const reload = (cm: ConfigMap) => {
    apply(mergeAuthSources(config, flags, cm.data ?? {}));
    log.info({ configMap: `${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name}` }, "reloaded the delegated authentication configuration");
  };
  informer.onUpdate((_old, cm) => reload(cm));
  informer.start();
  return () => informer.stop();
}
