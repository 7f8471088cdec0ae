// The client against a real kube-apiserver: CA-verified TLS (and refusal of a wrong CA), client-certificate and
// bearer-token auth, 403 for the unprivileged user, merged kubeconfigs, in-cluster loading, and the error classes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { KubeClient } from "#shared/kube/client.ts";
import { loadKubeConnection } from "#shared/kube/connection.ts";
import { isAlreadyExists, isConflict, isForbidden, isNotFound, isUnauthorized, KubeApiError } from "#shared/kube/errors.ts";
import { ConfigMaps, Namespaces, Pods } from "#shared/kube/resources.ts";
import { createCA } from "#shared/tls/index.ts";
import { startKubeApiserver, type TestCluster } from "#tests/kube/harness.ts";

let cluster: TestCluster;
let dir: string;
const noSA = { serviceAccountDir: "/nonexistent" };

beforeAll(async () => {
  cluster = await startKubeApiserver();
  dir = mkdtempSync(join(tmpdir(), "kube-client-it-"));
  await cluster.createNamespace("it");
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function clientFor(kubeconfig: string): Promise<KubeClient> {
  return new KubeClient(await loadKubeConnection({ KUBECONFIG: kubeconfig }, noSA));
}

type Review = { status: { userInfo: { username: string; groups?: string[] } } };
function whoAmI(c: KubeClient): Promise<Review> {
  return c.request<Review>("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {
    body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  });
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (e) => e as KubeApiError & { cause?: Error },
  );

describe("TLS", () => {
  test("connects when the kubeconfig's CA signed the serving certificate", async () => {
    const c = await clientFor(cluster.kubeconfig());
    const ns = await c.get<{ metadata: { name: string } }>(Namespaces, "default");
    expect(ns.metadata.name).toBe("default");
  });

  test("refuses the server when the kubeconfig trusts a different CA", async () => {
    const other = await createCA("some-other-ca");
    const c = await clientFor(cluster.kubeconfig({ caPem: other.certPem }));
    const e = await failure(c.get(Namespaces, "default"));
    expect(e).toBeInstanceOf(KubeApiError);
    expect([e.status, e.reason]).toEqual([0, "TransportError"]);
    expect(String(e.message)).toMatch(/certificate|verify|self.signed|issuer/i);
  });

  test("refuses the server when no CA is given (system roots do not know the test CA)", async () => {
    const c = new KubeClient({ server: cluster.url, certPem: cluster.admin.certPem, keyPem: cluster.admin.keyPem });
    const e = await failure(c.get(Namespaces, "default"));
    expect(e.status).toBe(0);
  });

  test("insecure-skip-tls-verify connects without a CA", async () => {
    const c = await clientFor(cluster.kubeconfig({ insecure: true }));
    expect((await whoAmI(c)).status.userInfo.username).toBe("test-admin");
  });
});

describe("authentication", () => {
  test("a client certificate authenticates as its subject, in its organisation's group", async () => {
    const r = await whoAmI(await clientFor(cluster.kubeconfig({ auth: "admin-cert" })));
    expect(r.status.userInfo.username).toBe("test-admin");
    expect(r.status.userInfo.groups).toContain("system:masters");
  });

  test("a bearer token authenticates as its user", async () => {
    const r = await whoAmI(await clientFor(cluster.kubeconfig({ auth: "user-token" })));
    expect(r.status.userInfo.username).toBe(cluster.user.name);
  });

  test("a wrong bearer token is 401 Unauthorized", async () => {
    const c = await clientFor(cluster.kubeconfig({ auth: "token", token: "not-a-valid-token" }));
    expect(isUnauthorized(await failure(c.get(Namespaces, "default")))).toBe(true);
  });

  test("the unprivileged user gets 403 Forbidden with verb, path and details", async () => {
    const c = await clientFor(cluster.kubeconfig({ auth: "user-token" }));
    const e = await failure(c.list(Pods, { namespace: "it" }));
    expect(isForbidden(e)).toBe(true);
    expect(e.verb).toBe("list");
    expect(e.path).toBe("/api/v1/namespaces/it/pods");
    expect(e.details?.kind).toBe("pods");
    expect(e.message).toContain(cluster.user.name);
    expect(e.message).not.toContain(cluster.user.token); // the token never shows up in an error
  });

  test("a service-account token read from a kubeconfig tokenFile (relative path) authenticates as the account", async () => {
    const token = await cluster.serviceAccountToken("it", "default", 600);
    mkdirSync(join(dir, "sa-kc"), { recursive: true });
    writeFileSync(join(dir, "sa-kc", "token"), token);
    writeFileSync(join(dir, "sa-kc", "ca.pem"), cluster.caPem);
    const kc = join(dir, "sa-kc", "config");
    writeFileSync(
      kc,
      stringify({
        "current-context": "sa",
        clusters: [{ name: "c", cluster: { server: cluster.url, "certificate-authority": "ca.pem" } }],
        users: [{ name: "sa", user: { tokenFile: "token" } }],
        contexts: [{ name: "sa", context: { cluster: "c", user: "sa", namespace: "it" } }],
      }),
    );
    const c = await clientFor(kc);
    expect((await whoAmI(c)).status.userInfo.username).toBe("system:serviceaccount:it:default");
    expect(c.defaultNamespace).toBe("it");
  });

  test("in-cluster loading (service host/port + mounted account) connects to the real apiserver", async () => {
    const sa = join(dir, "in-cluster-sa");
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, "token"), await cluster.serviceAccountToken("it", "default", 600));
    writeFileSync(join(sa, "ca.crt"), cluster.caPem);
    writeFileSync(join(sa, "namespace"), "it");
    const u = new URL(cluster.url);
    const conn = await loadKubeConnection({ KUBERNETES_SERVICE_HOST: u.hostname, KUBERNETES_SERVICE_PORT: u.port }, { serviceAccountDir: sa });
    const c = new KubeClient(conn);
    expect((await whoAmI(c)).status.userInfo.username).toBe("system:serviceaccount:it:default");
  });
});

test("a KUBECONFIG of several colon-separated files (cluster, user and context in different files) works end to end", async () => {
  const split = join(dir, "split");
  mkdirSync(join(split, "pki"), { recursive: true });
  writeFileSync(join(split, "pki", "ca.crt"), cluster.caPem);
  writeFileSync(join(split, "pki", "admin.crt"), cluster.admin.certPem);
  writeFileSync(join(split, "pki", "admin.key"), cluster.admin.keyPem);
  const first = join(split, "contexts.yaml");
  const second = join(split, "clusters.yaml");
  const third = join(split, "users.yaml");
  writeFileSync(first, stringify({ "current-context": "admin@test", contexts: [{ name: "admin@test", context: { cluster: "test", user: "admin", namespace: "it" } }] }));
  writeFileSync(
    second,
    stringify({
      "current-context": "ignored-because-the-first-file-set-one",
      clusters: [{ name: "test", cluster: { server: cluster.url, "certificate-authority": "pki/ca.crt" } }],
      // A user the context does not select: merging must not let it leak into the connection.
      users: [{ name: "viewer", user: { token: "unused" } }],
    }),
  );
  writeFileSync(
    third,
    stringify({
      clusters: [{ name: "test", cluster: { server: "https://127.0.0.1:1" } }], // shadowed by the second file
      users: [{ name: "admin", user: { "client-certificate": "pki/admin.crt", "client-key": "pki/admin.key" } }],
    }),
  );
  const c = await clientFor([first, second, third].join(":"));
  expect(c.conn.server).toBe(cluster.url);
  expect((await whoAmI(c)).status.userInfo.username).toBe("test-admin");
  const cms = await c.list(ConfigMaps, { namespace: c.defaultNamespace });
  expect(Array.isArray(cms.items)).toBe(true);
});

describe("errors and verbs as admin", () => {
  test("not found, already exists and a stale update classify as such", async () => {
    const c = await clientFor(cluster.kubeconfig());
    expect(isNotFound(await failure(c.get(ConfigMaps, "nope", { namespace: "it" })))).toBe(true);
    const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm1", namespace: "it" }, data: { a: "1" } };
    const created = await c.create<{ metadata: { resourceVersion: string } }>(ConfigMaps, cm);
    const dup = await failure(c.create(ConfigMaps, cm));
    expect([isAlreadyExists(dup), isConflict(dup)]).toEqual([true, false]);
    await c.update(ConfigMaps, { ...cm, metadata: { ...cm.metadata, resourceVersion: created.metadata.resourceVersion }, data: { a: "2" } });
    const stale = await failure(c.update(ConfigMaps, { ...cm, metadata: { ...cm.metadata, resourceVersion: created.metadata.resourceVersion }, data: { a: "3" } }));
    expect(isConflict(stale)).toBe(true);
    await c.patch(ConfigMaps, "cm1", { data: { b: "x" } }, { namespace: "it", type: "merge" });
    await c.patch(ConfigMaps, "cm1", [{ op: "remove", path: "/data/a" }], { namespace: "it", type: "json" });
    expect((await c.get<{ data: object }>(ConfigMaps, "cm1", { namespace: "it" })).data).toEqual({ b: "x" });
    const precondition = await failure(c.delete(ConfigMaps, "cm1", { namespace: "it", preconditions: { uid: "00000000-0000-0000-0000-000000000000" } }));
    expect(isConflict(precondition)).toBe(true);
    await c.delete(ConfigMaps, "cm1", { namespace: "it" });
    expect(isNotFound(await failure(c.delete(ConfigMaps, "cm1", { namespace: "it" })))).toBe(true);
  });

  test("a watch streams events as they happen, and ends quietly on abort", async () => {
    const c = await clientFor(cluster.kubeconfig());
    const list = await c.list(ConfigMaps, { namespace: "it" });
    const ac = new AbortController();
    const seen: string[] = [];
    const done = (async () => {
      for await (const ev of c.watch<{ metadata: { name: string } }>(ConfigMaps, { namespace: "it", resourceVersion: list.metadata.resourceVersion, signal: ac.signal })) {
        seen.push(`${ev.type} ${ev.object.metadata.name}`);
        if (seen.length === 3) ac.abort();
      }
    })();
    await c.create(ConfigMaps, { metadata: { name: "w1", namespace: "it" } });
    await c.patch(ConfigMaps, "w1", { data: { k: "v" } }, { namespace: "it", type: "merge" });
    await c.delete(ConfigMaps, "w1", { namespace: "it" });
    await done;
    expect(seen).toEqual(["ADDED w1", "MODIFIED w1", "DELETED w1"]);
  });
});
