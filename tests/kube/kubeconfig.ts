// Writes kubeconfig files for a TestCluster, embedding CA and credentials as *-data so the file stands alone.
import { writeFileSync } from "node:fs";
import { stringify } from "yaml";

export interface KubeconfigOptions {
  auth?: "admin-cert" | "user-token" | "token";
  /** Bearer token for auth "token" (e.g. from serviceAccountToken). */
  token?: string;
  path?: string;
  /** insecure-skip-tls-verify instead of a CA. */
  insecure?: boolean;
  /** Trust this CA instead of the cluster's (to prove a client rejects a wrong CA). */
  caPem?: string;
}

export interface KubeconfigInputs {
  url: string;
  caPem: string;
  admin: { certPem: string; keyPem: string };
  user: { name: string; token: string };
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

export function writeKubeconfig(c: KubeconfigInputs, opts: KubeconfigOptions, path: string): string {
  const auth = opts.auth ?? "admin-cert";
  let user: Record<string, string>;
  let userName: string;
  if (auth === "admin-cert") {
    user = { "client-certificate-data": b64(c.admin.certPem), "client-key-data": b64(c.admin.keyPem) };
    userName = "admin";
  } else if (auth === "user-token") {
    user = { token: c.user.token };
    userName = c.user.name;
  } else {
    if (!opts.token) throw new Error('kubeconfig({ auth: "token" }) needs opts.token');
    user = { token: opts.token };
    userName = "token";
  }
  const cluster: Record<string, unknown> = { server: c.url };
  if (opts.insecure) cluster["insecure-skip-tls-verify"] = true;
  else cluster["certificate-authority-data"] = b64(opts.caPem ?? c.caPem);
  const doc = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "test", cluster }],
    users: [{ name: userName, user }],
    contexts: [{ name: "test", context: { cluster: "test", user: userName } }],
    "current-context": "test",
    preferences: {},
  };
  writeFileSync(path, stringify(doc), { mode: 0o600 });
  return path;
}
