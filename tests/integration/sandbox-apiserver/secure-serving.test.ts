// Issue 22 cases 1 and 5 and issue 17's authorization safety net, against the real kube-apiserver with the aggregator
// in front of our server (a subprocess): the aggregator's pooled connection cannot be borrowed by a local process,
// identity header lines are read as kube-apiserver writes them, anonymous stays anonymous, every error is a Status,
// and a SubjectAccessReview that fails is a denial that is not remembered.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { kubectl } from "../../kube/kubectl.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "./fixture.ts";
import { borrowIdentity, curlUnixAsNobody, unixListeners } from "./internal-listener.ts";
import { rawExchange } from "./raw-http.ts";
import { waitFor } from "#tests/support/wait.ts";

const BASE = "/apis/agents.x-k8s.io/v1beta1";
let stack: Stack;
let server: ApiserverProcess;
/** kube-apiserver's own front-proxy client certificate: what the aggregator presents to us. */
let aggregatorCert: { certPem: string; keyPem: string };

beforeAll(async () => {
  stack = await startStack();
  server = await stack.startServer({ args: ["--enable-warm-pool-driver=false", "--sandboxd-token=t"] });
  await stack.register(server.port);
  for (const ns of ["a", "b", "c"]) await stack.cluster.createNamespace(ns);
  await stack.publishSeen({
    node: "n1",
    publishedAt: rfc3339(Date.now()),
    entries: [
      { name: "a/x", id: "sb_ax", phase: "Running" },
      { name: "b/y", id: "sb_by", phase: "Running" },
      { name: "c/z", id: "sb_cz", phase: "Running" },
    ],
  });
  const args = readFileSync(`/proc/${stack.cluster.pid}/cmdline`, "utf8").split("\0");
  const flag = (name: string) => readFileSync(args.find((a) => a.startsWith(`--${name}=`))!.slice(name.length + 3), "utf8");
  aggregatorCert = { certPem: flag("proxy-client-cert-file"), keyPem: flag("proxy-client-key-file") };
}, 90_000);

afterAll(async () => {
  await server?.stop();
  await stack?.stop();
});

const as = (user: string, groups: string[]) => [`X-Remote-User: ${user}`, ...groups.map((g) => `X-Remote-Group: ${g}`)].join("\r\n");
const get = (path: string, head: string) => `GET ${path} HTTP/1.1\r\nhost: sandbox-apiserver\r\naccept: application/json\r\n${head}\r\nconnection: close\r\n\r\n`;

describe("issue 22 case 1: the aggregator's identity cannot be borrowed", () => {
  test("with the aggregator's pooled connections open, a local process borrowing their ports gets no identity; the internal listener is a 0700 Unix socket", async () => {
    // Requests through the aggregator leave its keep-alive connections to our secure port open.
    for (const ns of ["a", "b"]) expect((await kubectl(["get", "sandboxes", "-n", ns, "-o", "name"], { kubeconfig: stack.admin })).code).toBe(0);
    const attempts = await borrowIdentity(server.proc.pid, server.port, `${BASE}/namespaces/b/sandboxes`, { "X-Remote-User": "mallory", "X-Remote-Group": "system:masters" });
    for (const a of attempts) {
      expect(a.status).not.toBe(200);
      expect(a.body).not.toContain("sb_by");
    }
    const sockets = unixListeners(server.proc.pid);
    expect(sockets).toHaveLength(1);
    expect(statSync(dirname(sockets[0]!)).mode & 0o777).toBe(0o700);
    expect(await curlUnixAsNobody(sockets[0]!)).toBe(7);
    // The aggregator's path still works after all that.
    const r = await kubectl(["get", "sandbox", "y", "-n", "b", "-o", "name"], { kubeconfig: stack.admin });
    expect(r.stdout.trim()).toBe("sandbox.agents.x-k8s.io/y");
  });
});

describe("issue 22 case 5: identity headers as kube-apiserver sends them", () => {
  test("a group line `team,system:masters` is one group: this server's SubjectAccessReview refuses mallory", async () => {
    const [r] = await rawExchange(server.port, get(`${BASE}/namespaces/b/sandboxes`, as("mallory", ["team,system:masters"])), aggregatorCert);
    expect(r?.status).toBe(403);
    const body = JSON.parse(r!.body) as { kind: string; message: string };
    expect(body.kind).toBe("Status");
    expect(body.message).toContain('User "mallory" cannot list resource "sandboxes"');
    // The same user with the group on its own line is what the aggregator sends for a real master: allowed.
    const [ok] = await rawExchange(server.port, get(`${BASE}/namespaces/b/sandboxes`, as("mallory", ["team", "system:masters"])), aggregatorCert);
    expect(ok?.status).toBe(200);
    expect(ok!.body).toContain("sb_by");
  });

  test("a forwarded system:anonymous is not system:authenticated: a grant to authenticated users does not reach it", async () => {
    await stack.cluster.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-lister, namespace: c}
rules: [{apiGroups: [agents.x-k8s.io], resources: [sandboxes], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: authenticated-list, namespace: c}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-lister}
subjects: [{kind: Group, apiGroup: rbac.authorization.k8s.io, name: "system:authenticated"}]
`);
    // Any authenticated user now lists c (waiting for RBAC to apply; a new name each try, past the denial cache), ...
    let attempt = 0;
    await waitFor("the RoleBinding to apply", async () => {
      const [r] = await rawExchange(server.port, get(`${BASE}/namespaces/c/sandboxes`, as(`someone-${attempt++}`, [])), aggregatorCert);
      return r?.status === 200;
    }, 15_000);
    // ... but not a request the aggregator forwarded for the anonymous user.
    const [anon] = await rawExchange(server.port, get(`${BASE}/namespaces/c/sandboxes`, as("system:anonymous", ["system:unauthenticated"])), aggregatorCert);
    expect(anon?.status).toBe(403);
    expect(JSON.parse(anon!.body).message).toContain('User "system:anonymous"');
  });
});

describe("issue 22 case 5: every error is a Kubernetes Status, never Bun's development page", () => {
  const cases: [string, string, number][] = [
    ["a bad % escape, unauthenticated", get(`${BASE}/namespaces/%zz/sandboxes`, "x-probe: 1"), 400],
    ["OPTIONS *", "OPTIONS * HTTP/1.1\r\nhost: x\r\n\r\n", 400],
    ["CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n", 405],
    ["a body over 1.5 MiB", `POST ${BASE}/namespaces/a/sandboxes HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${1536 * 1024 + 1}\r\n\r\n{`, 413],
  ];
  for (const [what, raw, code] of cases) {
    test(`${what}: ${code}`, async () => {
      const answers = await rawExchange(server.port, raw);
      expect(answers).toHaveLength(1);
      const a = answers[0]!;
      expect(a.status).toBe(code);
      expect(a.headers["content-type"]).toStartWith("application/json");
      expect(JSON.parse(a.body)).toMatchObject({ kind: "Status", apiVersion: "v1", status: "Failure", code });
      expect(a.body).not.toContain("<html");
      expect(a.body).not.toContain("services/sandbox-apiserver");
    });
  }
  test("no raw error text reached stderr outside the JSON log lines", () => {
    const stray = server.stderr().split("\n").filter((l) => l.trim() && !l.startsWith("{"));
    expect(stray).toEqual([]);
  });
});

describe("issue 17: a SubjectAccessReview that fails is a denial, and is not remembered", () => {
  test("reviews the cluster refuses (the authorization kubeconfig may not create SubjectAccessReviews) deny; once allowed, the next request is reviewed again at once", async () => {
    const user = stack.cluster.user;
    const weak = await stack.startServer({
      args: ["--enable-warm-pool-driver=false", "--sandboxd-token=t", `--authorization-kubeconfig=${stack.cluster.kubeconfig({ auth: "user-token" })}`],
    });
    try {
      const direct = () =>
        fetch(`https://127.0.0.1:${weak.port}${BASE}/namespaces/a/sandboxes/x`, { headers: { authorization: `Bearer ${user.token}` }, tls: { ca: stack.caPem } });
      const denied = await direct();
      expect(denied.status).toBe(403);
      expect(((await denied.json()) as { message: string }).message).toContain("authorization review failed");
      // Let the reviewing identity create reviews, and the user get sandboxes in a.
      await stack.cluster.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: test-user-reviews}
rules:
- {apiGroups: [authorization.k8s.io], resources: [subjectaccessreviews], verbs: [create]}
- {apiGroups: [agents.x-k8s.io], resources: [sandboxes], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: test-user-reviews}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: test-user-reviews}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: ${user.name}}]
`);
      // A cached failure would hold for the 10 s denial TTL; a fresh review answers as soon as RBAC has applied.
      const granted = Date.now();
      await waitFor("the grant to apply", async () => (await direct()).status === 200, 8_000, 200);
      expect(Date.now() - granted).toBeLessThan(8_000);
    } finally {
      await weak.stop();
    }
  }, 60_000);
});
