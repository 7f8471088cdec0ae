// The test kube-apiserver harness against the real binary: the foundation every Kubernetes-facing test stands on.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { parse } from "yaml";
import { helmBinary } from "../kube/peers.ts";
import { isListening } from "../kube/ports.ts";
import { startKubeApiserver, type TestCluster } from "../kube/harness.ts";

let cluster: TestCluster;
let startupMs = 0;

beforeAll(async () => {
  const t0 = performance.now();
  cluster = await startKubeApiserver();
  startupMs = performance.now() - t0;
  console.error(`kube-harness: kube-apiserver ready in ${(startupMs / 1000).toFixed(2)}s`);
}, 180_000);

afterAll(async () => {
  await cluster?.stop();
});

const crd = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.harness.test.io
spec:
  group: harness.test.io
  scope: Namespaced
  names: { plural: widgets, singular: widget, kind: Widget, listKind: WidgetList }
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: { type: integer }
---
apiVersion: harness.test.io/v1
kind: Widget
metadata: { name: w1, namespace: widgets }
spec: { size: 3 }
---
apiVersion: v1
kind: Namespace
metadata: { name: widgets }
`;

describe("test kube-apiserver harness", () => {
  test("serves /version as v1.35.4 over TLS verified against the cluster CA", async () => {
    const r = await fetch(`${cluster.url}/version`, { tls: { ca: cluster.caPem } });
    expect(r.status).toBe(200);
    const v = (await r.json()) as { gitVersion: string; major: string; minor: string };
    expect(v.gitVersion).toBe("v1.35.4");
    expect(v.major).toBe("1");
    expect(v.minor).toBe("35");
  });

  test("the bootstrap namespaces exist and default has its ServiceAccount", async () => {
    for (const ns of ["default", "kube-system", "kube-public", "kube-node-lease"]) {
      expect((await cluster.adminFetch(`/api/v1/namespaces/${ns}`)).status).toBe(200);
    }
    expect((await cluster.adminFetch("/api/v1/namespaces/default/serviceaccounts/default")).status).toBe(200);
  });

  test("apply installs a CRD, waits until it is Established, and creates its custom resource in the same call", async () => {
    await cluster.apply(crd);
    const r = await cluster.adminFetch("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.harness.test.io");
    const body = (await r.json()) as { status: { conditions: { type: string; status: string }[] } };
    expect(body.status.conditions).toContainEqual(expect.objectContaining({ type: "Established", status: "True" }));
    const w = await cluster.adminFetch("/apis/harness.test.io/v1/namespaces/widgets/widgets/w1");
    expect(((await w.json()) as { spec: { size: number } }).spec.size).toBe(3);
  });

  test("apply twice replaces the object's fields", async () => {
    await cluster.apply([{ apiVersion: "harness.test.io/v1", kind: "Widget", metadata: { name: "w1", namespace: "widgets" }, spec: { size: 5 } }]);
    const w = await cluster.adminFetch("/apis/harness.test.io/v1/namespaces/widgets/widgets/w1");
    expect(((await w.json()) as { spec: { size: number } }).spec.size).toBe(5);
  });

  test("the static-token user authenticates but is forbidden to list pods", async () => {
    const r = await fetch(`${cluster.url}/api/v1/namespaces/default/pods`, {
      headers: { authorization: `Bearer ${cluster.user.token}` },
      tls: { ca: cluster.caPem },
    });
    expect(r.status).toBe(403);
    expect(((await r.json()) as { message: string }).message).toContain(`"${cluster.user.name}"`);
  });

  test("an unknown bearer token is 401, not 403", async () => {
    const r = await fetch(`${cluster.url}/api/v1/namespaces`, { headers: { authorization: "Bearer nope" }, tls: { ca: cluster.caPem } });
    expect(r.status).toBe(401);
  });

  test("a TokenRequest token authenticates as its ServiceAccount (SelfSubjectReview)", async () => {
    await cluster.createNamespace("team-a");
    const token = await cluster.serviceAccountToken("team-a", "default", 600);
    const r = await fetch(`${cluster.url}/apis/authentication.k8s.io/v1/selfsubjectreviews`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" }),
      tls: { ca: cluster.caPem },
    });
    expect(r.status).toBe(201);
    const review = (await r.json()) as { status: { userInfo: { username: string; groups: string[] } } };
    expect(review.status.userInfo.username).toBe("system:serviceaccount:team-a:default");
    expect(review.status.userInfo.groups).toContain("system:serviceaccounts:team-a");
  });

  test("apply grants RBAC: a ServiceAccount bound to a Role lists pods in its namespace only", async () => {
    await cluster.apply([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "team-b" } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "reader", namespace: "team-b" } },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "pod-reader", namespace: "team-b" },
        rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["list"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "reader", namespace: "team-b" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "pod-reader" },
        subjects: [{ kind: "ServiceAccount", name: "reader", namespace: "team-b" }],
      },
    ]);
    // apply() of a Namespace stands in for the missing ServiceAccount controller.
    expect((await cluster.adminFetch("/api/v1/namespaces/team-b/serviceaccounts/default")).status).toBe(200);
    const token = await cluster.serviceAccountToken("team-b", "reader");
    const list = (ns: string) =>
      fetch(`${cluster.url}/api/v1/namespaces/${ns}/pods`, { headers: { authorization: `Bearer ${token}` }, tls: { ca: cluster.caPem } });
    expect((await list("team-b")).status).toBe(200);
    expect((await list("default")).status).toBe(403);
  });

  test("the admin client certificate is system:masters", async () => {
    const r = await cluster.adminFetch("/apis/authentication.k8s.io/v1/selfsubjectreviews", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" }),
    });
    const review = (await r.json()) as { status: { userInfo: { username: string; groups: string[] } } };
    expect(review.status.userInfo.groups).toContain("system:masters");
  });

  test("a TLS client trusting another CA is refused", async () => {
    const { createCA } = await import("../../shared/tls/index.ts");
    const other = await createCA("other");
    await expect(fetch(`${cluster.url}/version`, { tls: { ca: other.certPem } })).rejects.toThrow();
  });

  test("kubeconfig files embed the server, the CA and the chosen credentials", async () => {
    const admin = parse(readFileSync(cluster.kubeconfig(), "utf8"));
    expect(admin.clusters[0].cluster.server).toBe(cluster.url);
    expect(Buffer.from(admin.clusters[0].cluster["certificate-authority-data"], "base64").toString()).toBe(cluster.caPem);
    expect(admin.users[0].user["client-certificate-data"]).toBeString();
    const user = parse(readFileSync(cluster.kubeconfig({ auth: "user-token", insecure: true }), "utf8"));
    expect(user.users[0].user.token).toBe(cluster.user.token);
    expect(user.clusters[0].cluster["insecure-skip-tls-verify"]).toBe(true);
    const tok = parse(readFileSync(cluster.kubeconfig({ auth: "token", token: "abc", caPem: "X" }), "utf8"));
    expect(tok.users[0].user.token).toBe("abc");
  });

  test("helm talks to the cluster through a harness kubeconfig: admin lists releases, the plain user is forbidden", async () => {
    const helm = await helmBinary();
    const version = Bun.spawnSync([helm, "version", "--short"], { stdout: "pipe" }).stdout.toString();
    expect(version).toStartWith("v3.22.0");
    const asAdmin = Bun.spawnSync([helm, "list", "-A", "--kubeconfig", cluster.kubeconfig()], { stdout: "pipe", stderr: "pipe" });
    expect(asAdmin.stderr.toString()).toBe("");
    expect(asAdmin.exitCode).toBe(0);
    const asUser = Bun.spawnSync([helm, "list", "-n", "default", "--kubeconfig", cluster.kubeconfig({ auth: "user-token" })], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(asUser.exitCode).not.toBe(0);
    expect(asUser.stderr.toString()).toContain("forbidden");
  });

  test("starts in seconds", () => {
    expect(startupMs).toBeLessThan(30_000);
  });
});

test("stop() kills the apiserver, frees its port and removes its temp dir", async () => {
  const c = await startKubeApiserver();
  const port = Number(new URL(c.url).port);
  const kubeconfig = c.kubeconfig();
  expect(await isListening(port)).toBe(true);
  await c.stop();
  expect(await isListening(port)).toBe(false);
  expect(existsSync(kubeconfig)).toBe(false);
  expect(processesMentioning(dirname(kubeconfig))).toEqual([]);
  await c.stop(); // idempotent
}, 180_000);

test("a test process killed with SIGKILL takes its apiserver with it", async () => {
  // The child starts a cluster, reports its temp dir and port, then waits to be killed without any cleanup.
  const script = `
    import { dirname } from "node:path";
    import { startKubeApiserver } from ${JSON.stringify(`${import.meta.dir}/../kube/harness.ts`)};
    const c = await startKubeApiserver();
    console.log(JSON.stringify({ dir: dirname(c.kubeconfig()), port: new URL(c.url).port }));
    await Bun.sleep(600_000);
  `;
  const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "inherit" });
  const reader = child.stdout.getReader();
  let out = "";
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    out += new TextDecoder().decode(value);
  }
  const { dir, port } = JSON.parse(out) as { dir: string; port: string };
  expect(processesMentioning(dir).length).toBeGreaterThan(0);
  child.kill("SIGKILL");
  await child.exited;
  // The kernel tears an exiting process down in steps (its memory, and so its command line, before its sockets).
  const gone = async () => processesMentioning(dir).length === 0 && !(await isListening(Number(port)));
  const deadline = Date.now() + 10_000;
  while (!(await gone()) && Date.now() < deadline) await Bun.sleep(100);
  expect(processesMentioning(dir)).toEqual([]);
  expect(await isListening(Number(port))).toBe(false);
  rmSync(dir, { recursive: true, force: true }); // the killed runner could not clean up
}, 180_000);

function processesMentioning(text: string): string[] {
  const r = Bun.spawnSync(["pgrep", "-f", "--", text], { stdout: "pipe" });
  return r.stdout.toString().split("\n").filter(Boolean);
}
