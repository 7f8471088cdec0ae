import { describe, expect, test, beforeAll, afterAll } from "bun:test";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { KubeConfigError, loadKubeConnection } from "#shared/kube/connection.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kubeconn-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const b64 = (s: string) => Buffer.from(s).toString("base64");
function write(rel: string, content: string | object): string {
  const p = join(dir, rel);
  mkdirSync(join(p, ".."), { recursive: true });
  writeFileSync(p, typeof content === "string" ? content : stringify(content));
  return p;
}
const noSA = { serviceAccountDir: "/nonexistent-sa-dir" };

describe("in-cluster service account", () => {
  test("is used when KUBERNETES_SERVICE_HOST/PORT are set and the token is mounted", async () => {
    write("sa/token", "tok-123\n");
    write("sa/ca.crt", "CA-PEM");
    write("sa/namespace", "kube-ns\n");
    const c = await loadKubeConnection(
      { KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBERNETES_SERVICE_PORT: "443", KUBECONFIG: "/also/ignored" },
      { serviceAccountDir: join(dir, "sa") },
    );
    expect(c).toEqual({
      server: "https://10.0.0.1:443",
      caPem: "CA-PEM",
      token: "tok-123",
      tokenFile: join(dir, "sa", "token"),
      namespace: "kube-ns",
    });
  });

  test("brackets an IPv6 service host", async () => {
    const c = await loadKubeConnection(
      { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "6443" },
      { serviceAccountDir: join(dir, "sa") },
    );
    expect(c.server).toBe("https://[fd00::1]:6443");
  });

  test("wins over KUBECONFIG, and without a token falls through to it", async () => {
    const kc = write("kc-simple.yaml", {
      "current-context": "c",
      clusters: [{ name: "k", cluster: { server: "https://from-kubeconfig:6443/" } }],
      contexts: [{ name: "c", context: { cluster: "k" } }],
    });
    const env = { KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBERNETES_SERVICE_PORT: "443", KUBECONFIG: kc };
    expect((await loadKubeConnection(env, { serviceAccountDir: join(dir, "sa") })).server).toBe("https://10.0.0.1:443");
    expect((await loadKubeConnection(env, { serviceAccountDir: join(dir, "empty-sa") })).server).toBe("https://from-kubeconfig:6443");
  });
});

describe("kubeconfig", () => {
  test("resolves relative certificate, key and token files against the kubeconfig's own directory", async () => {
    write("nested/certs/ca.pem", "CA");
    write("nested/certs/client.pem", "CERT");
    write("nested/certs/client.key", "KEY");
    write("nested/token.txt", "file-token");
    const kc = write("nested/config", {
      "current-context": "dev",
      clusters: [{ name: "k", cluster: { server: "https://k:6443", "certificate-authority": "certs/ca.pem" } }],
      users: [{ name: "u", user: { "client-certificate": "certs/client.pem", "client-key": "certs/client.key", tokenFile: "token.txt" } }],
      contexts: [{ name: "dev", context: { cluster: "k", user: "u", namespace: "team" } }],
    });
    const c = await loadKubeConnection({ KUBECONFIG: kc }, noSA);
    expect(c).toEqual({
      server: "https://k:6443",
      caPem: "CA",
      certPem: "CERT",
      keyPem: "KEY",
      tokenFile: join(dir, "nested", "token.txt"),
      namespace: "team",
    });
  });

  test("inline -data fields are base64 and win over file paths; skip-verify and token are honoured", async () => {
    const kc = write("inline.yaml", {
      "current-context": "x",
      clusters: [
        { name: "k", cluster: { server: "https://k", "certificate-authority-data": b64("CA-INLINE"), "certificate-authority": "missing.pem", "insecure-skip-tls-verify": true } },
      ],
      users: [{ name: "u", user: { "client-certificate-data": b64("C"), "client-key-data": b64("K"), token: "t0k" } }],
      contexts: [{ name: "x", context: { cluster: "k", user: "u" } }],
    });
    const c = await loadKubeConnection({ KUBECONFIG: kc }, noSA);
    expect(c).toEqual({ server: "https://k", caPem: "CA-INLINE", certPem: "C", keyPem: "K", token: "t0k", insecureSkipVerify: true });
  });

  test("several colon-separated files merge as kubectl does: first definition of a name wins, first current-context wins", async () => {
    const a = write("merge/a.yaml", {
      // no current-context here: the second file's applies
      clusters: [{ name: "prod", cluster: { server: "https://prod-from-a" } }],
      users: [{ name: "alice", user: { token: "alice-a" } }],
    });
    const b = write("merge/b.yaml", {
      "current-context": "ctx-b",
      clusters: [
        { name: "prod", cluster: { server: "https://prod-from-b" } },
        { name: "dev", cluster: { server: "https://dev-from-b" } },
      ],
      users: [{ name: "alice", user: { token: "alice-b" } }],
      contexts: [{ name: "ctx-b", context: { cluster: "prod", user: "alice", namespace: "from-b" } }],
    });
    const c3 = write("merge/c.yaml", {
      "current-context": "ctx-c",
      contexts: [
        { name: "ctx-b", context: { cluster: "dev", user: "alice" } },
        { name: "ctx-c", context: { cluster: "dev" } },
      ],
    });
    const c = await loadKubeConnection({ KUBECONFIG: [a, "", "/does/not/exist", b, c3].join(":") }, noSA);
    expect(c).toEqual({ server: "https://prod-from-a", token: "alice-a", namespace: "from-b" });
  });

  test("a later file's relative paths resolve against that later file", async () => {
    write("merge2/other/ca.pem", "CA-OTHER");
    const a = write("merge2/a.yaml", { "current-context": "c", contexts: [{ name: "c", context: { cluster: "k" } }] });
    const b = write("merge2/other/b.yaml", { clusters: [{ name: "k", cluster: { server: "https://k", "certificate-authority": "ca.pem" } }] });
    const c = await loadKubeConnection({ KUBECONFIG: `${a}:${b}` }, noSA);
    expect(c.caPem).toBe("CA-OTHER");
  });

  test("never falls back to $HOME/.kube/config: KUBECONFIG unset outside a cluster is an error naming KUBECONFIG", async () => {
    write("home/.kube/config", {
      "current-context": "c",
      clusters: [{ name: "k", cluster: { server: "https://home" } }],
      contexts: [{ name: "c", context: { cluster: "k" } }],
    });
    await expect(loadKubeConnection({ HOME: join(dir, "home") }, noSA)).rejects.toThrow(/KUBECONFIG is not set/);
  });

  test("HTTPS_PROXY is taken for an https server unless NO_PROXY exempts it (client-go's rules)", async () => {
    const kc = write("proxied.yaml", {
      "current-context": "c",
      clusters: [{ name: "k", cluster: { server: "https://kube.example.test:6443" } }],
      contexts: [{ name: "c", context: { cluster: "k" } }],
    });
    expect((await loadKubeConnection({ KUBECONFIG: kc, HTTPS_PROXY: "proxy.corp:3128" }, noSA)).proxyUrl).toBe("http://proxy.corp:3128");
    expect((await loadKubeConnection({ KUBECONFIG: kc, https_proxy: "http://p:1", NO_PROXY: ".example.test" }, noSA)).proxyUrl).toBeUndefined();
    expect((await loadKubeConnection({ KUBECONFIG: kc, HTTP_PROXY: "http://p:1" }, noSA)).proxyUrl).toBeUndefined(); // http proxy is not for https
  });

  test("a context naming an undefined cluster is an error that names it", async () => {
    const kc = write("bad.yaml", { "current-context": "c", contexts: [{ name: "c", context: { cluster: "nope" } }] });
    await expect(loadKubeConnection({ KUBECONFIG: kc }, noSA)).rejects.toThrow(/nope/);
  });

  test("an exec plugin user is refused with a clear message rather than connecting anonymously", async () => {
    const kc = write("exec.yaml", {
      "current-context": "c",
      clusters: [{ name: "k", cluster: { server: "https://k" } }],
      users: [{ name: "u", user: { exec: { command: "aws" } } }],
      contexts: [{ name: "c", context: { cluster: "k", user: "u" } }],
    });
    await expect(loadKubeConnection({ KUBECONFIG: kc }, noSA)).rejects.toThrow(/exec or auth-provider/);
  });
});

test("with neither an in-cluster account nor a kubeconfig, loading throws an error that says so", async () => {
  const err = await loadKubeConnection({}, noSA).catch((e) => e);
  expect(err).toBeInstanceOf(KubeConfigError);
  expect(err.message).toMatch(/not in a cluster.*KUBECONFIG is not set/);
  const err2 = await loadKubeConnection({ KUBECONFIG: "/nope/a:/nope/b" }, noSA).catch((e) => e);
  expect(err2.message).toMatch(/names no existing file/);
});
