// kubectl through the aggregator (the real client, the real kube-apiserver, our server behind an APIService), one
// test per spec §12 scenario it covers; the scenario number leads each name.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { kubectl, kubectlStream } from "../../kube/kubectl.ts";
import { type ApiserverProcess, type Stack, readLines, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "fleet-root-token";
const IMG = "ghcr.io/x:1";
let stack: Stack;
let server: ApiserverProcess;
let n1: SandboxdSim;
let n2: SandboxdSim;

const k = (args: string[], stdin?: string) => kubectl(args, { kubeconfig: stack.admin, ...(stdin !== undefined ? { stdin } : {}) });

beforeAll(async () => {
  stack = await startStack();
  [n1, n2] = await Promise.all([
    startSandboxdSim({ rootToken: ROOT, pools: [`${IMG}/none/small=20`, `${IMG}/none/medium=5`, `${IMG}/none/large=5`, `${IMG}/egress/small=5`] }),
    startSandboxdSim({ rootToken: ROOT, pools: [`${IMG}/none/small=20`] }),
  ]);
  server = await stack.startServer({ args: [`--sandboxd-token=${ROOT}`, "--enable-warm-pool-driver=false"] });
  await stack.register(server.port);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await Promise.all([n1?.stop(), n2?.stop()]);
  await stack?.stop();
});

const now = () => rfc3339(Date.now());

describe("sandbox-apiserver through the aggregator", () => {
  test("1: kubectl api-resources lists sandboxes (namespaced, Sandbox, create/delete/get/list/patch/update/watch) and the APIService is Available", async () => {
    const r = await k(["api-resources", "--api-group=agents.x-k8s.io", "-o", "wide"]);
    expect(r.stderr).toBe("");
    const line = r.stdout.split("\n").find((l) => /^sandboxes\s/.test(l));
    expect(line).toBeDefined();
    // patch and update change spec.operatingMode only (issue 28 item 3).
    expect(line).toMatch(/agents\.x-k8s\.io\/v1beta1\s+true\s+Sandbox\s+create,delete,get,list,patch,update,watch/);
    const svc = await k(["get", "apiservice", "v1beta1.agents.x-k8s.io", "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].status}"]);
    expect(svc.stdout).toBe("True");
  });

  test("2: GET /apis/agents.x-k8s.io/v1beta1 via kube-apiserver lists sandboxes and four sandboxes/<verb> entries with verbs [create]", async () => {
    const r = await k(["get", "--raw", "/apis/agents.x-k8s.io/v1beta1"]);
    const doc = JSON.parse(r.stdout) as { resources: { name: string; verbs: string[]; kind: string }[] };
    expect(doc.resources.map((x) => x.name).sort()).toEqual(["sandboxes", "sandboxes/fork", "sandboxes/pause", "sandboxes/resume", "sandboxes/snapshot"]);
    for (const sub of doc.resources.filter((x) => x.name.includes("/"))) expect(sub.verbs).toEqual(["create"]);
  });

  test("3: kubectl get sandboxes -A shows every entry of two fresh inventories sorted by namespace/name under NAME, PHASE, NODE, TEMPLATE, AGE (issue 21)", async () => {
    await stack.publish({
      node: "n1",
      address: n1.addr,
      publishedAt: now(),
      entries: [
        { name: "demo", id: "sb_demo", phase: "Running", claimedAt: "2026-07-06T10:00:00Z" },
        { name: "team-b/zeta", id: "sb_zeta", phase: "Running" },
      ],
    });
    await stack.publish({ node: "n2", address: n2.addr, publishedAt: now(), entries: [{ name: "team-a/alpha", id: "sb_alpha", phase: "Hibernated" }] });
    const out = await waitFor("3 rows", async () => {
      const r = await k(["get", "sandboxes", "-A"]);
      return r.stdout.split("\n").filter(Boolean).length === 4 ? r.stdout : undefined;
    }, 10_000);
    const lines = out.split("\n").filter(Boolean);
    expect(lines[0]).toMatch(/^NAMESPACE\s+NAME\s+PHASE\s+MODE\s+NODE\s+TEMPLATE\s+AGE$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 2).join("/"))).toEqual(["default/demo", "team-a/alpha", "team-b/zeta"]);
    // Claimed 2026-07-06: its age is in days; an entry without claimedAt has no age.
    expect(lines[1]).toMatch(/^default\s+demo\s+Running\s+Running\s+n1\s+<none>\s+\d+d/);
    expect(lines[2]).toMatch(/^team-a\s+alpha\s+Hibernated\s+Suspended\s+n2\s+<none>\s+<unknown>$/);
  });

  test("4: -o json carries node/phase labels, claim-id/deadline annotations, podIPs from addr and Ready True reason Running; Hibernated is Ready False", async () => {
    await stack.publish({
      node: "n1",
      address: n1.addr,
      publishedAt: now(),
      entries: [
        { name: "default/rich", id: "sb_rich", phase: "Running", addr: "10.0.0.5:7777", deadline: "2026-12-31T10:00:00.5Z", template: IMG, claimRef: "default/rich" },
        { name: "default/sleepy", id: "sb_sleepy", phase: "Hibernated" },
      ],
    });
    const obj = await waitFor("sandbox rich", async () => {
      const r = await k(["get", "sandbox", "rich", "-o", "json"]);
      return r.code === 0 ? JSON.parse(r.stdout) : undefined;
    }, 10_000);
    expect(obj.metadata.labels).toEqual({
      "sandbox.cocoonstack.io/node": "n1",
      "sandbox.cocoonstack.io/phase": "Running",
      "sandbox.cocoonstack.io/template": IMG,
      "sandbox.cocoonstack.io/claim": "rich",
    });
    expect(obj.metadata.annotations).toEqual({ "sandbox.cocoonstack.io/claim-id": "sb_rich", "sandbox.cocoonstack.io/deadline": "2026-12-31T10:00:00Z" });
    expect(obj.status.podIPs).toEqual(["10.0.0.5"]);
    expect(obj.status.nodeName).toBe("n1");
    expect(obj.spec).toEqual({ operatingMode: "Running" });
    expect(obj.status.conditions).toEqual([
      { type: "Ready", status: "True", reason: "Running", message: 'phase "Running" reported by node "n1" inventory' },
      { type: "Suspended", status: "False", reason: "Running", message: 'running on node "n1"' },
    ]);
    const sleepy = JSON.parse((await k(["get", "sandbox", "sleepy", "-o", "json"])).stdout);
    expect(sleepy.status.conditions[0].status).toBe("False");
    expect(sleepy.status.conditions[0].reason).toBe("Hibernated");
    // Hibernated (paused, or asleep by itself) reads operatingMode Suspended with the Suspended condition (issue 28.3).
    expect(sleepy.spec).toEqual({ operatingMode: "Suspended" });
    expect(sleepy.status.conditions[1]).toMatchObject({ type: "Suspended", status: "True", reason: "Hibernated" });
    const yaml = await k(["get", "sandbox", "rich", "-o", "yaml"]);
    expect(yaml.stdout).toContain("kind: Sandbox");
    expect(yaml.stdout).toContain("nodeName: n1");
  });

  test("5: -l sandbox.cocoonstack.io/node=n1 lists only n1's entries; --field-selector status.nodeName works too", async () => {
    await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), entries: [{ name: "default/one", id: "sb_1", phase: "Running" }] });
    await stack.publish({ node: "n2", address: n2.addr, publishedAt: now(), entries: [{ name: "default/two", id: "sb_2", phase: "Running" }] });
    await waitFor("sandbox two in the list", async () => (await k(["get", "sandboxes", "-o", "name"])).stdout.includes("two"), 10_000);
    const byLabel = await k(["get", "sandboxes", "-A", "-l", "sandbox.cocoonstack.io/node=n1", "-o", "name"]);
    expect(byLabel.stdout.trim().split("\n")).toEqual(["sandbox.agents.x-k8s.io/one"]);
    const byField = await k(["get", "sandboxes", "-A", "--field-selector", "status.nodeName=n2", "-o", "name"]);
    expect(byField.stdout.trim().split("\n")).toEqual(["sandbox.agents.x-k8s.io/two"]);
    const byName = await k(["get", "sandboxes", "--field-selector", "metadata.name=one", "-o", "name"]);
    expect(byName.stdout.trim()).toBe("sandbox.agents.x-k8s.io/one");
  });

  test("6: an image reference as a label value, or an unsupported field selector, is a 400", async () => {
    const img = await k(["get", "sandboxes", "-A", "-l", `sandbox.cocoonstack.io/template=${IMG}`]);
    expect(img.code).not.toBe(0);
    expect(img.stderr).toContain("BadRequest");
    const field = await k(["get", "sandboxes", "-A", "--field-selector", "spec.foo=bar"]);
    expect(field.code).not.toBe(0);
    expect(field.stderr).toContain("spec.foo");
    expect(field.stderr).toContain("is not supported on sandboxes");
    const exists = await k(["get", "sandboxes", "-A", "-l", "sandbox.cocoonstack.io/template"]);
    expect(exists.code).toBe(0);
  });
});

type Obj = { metadata: { name: string; annotations?: Record<string, string> }; status: { nodeName?: string; podIPs?: string[] } };

function sandbox(name: string | { generateName: string }, o: { resources?: object; annotations?: object; podAnnotations?: object; shutdownTime?: string; image?: string } = {}) {
  return JSON.stringify({
    apiVersion: "agents.x-k8s.io/v1beta1",
    kind: "Sandbox",
    metadata: { ...(typeof name === "string" ? { name } : name), ...(o.annotations ? { annotations: o.annotations } : {}) },
    spec: {
      ...(o.shutdownTime ? { shutdownTime: o.shutdownTime } : {}),
      podTemplate: {
        ...(o.podAnnotations ? { metadata: { annotations: o.podAnnotations } } : {}),
        spec: { containers: [{ name: "main", image: o.image ?? IMG, ...(o.resources ? { resources: o.resources } : {}) }] },
      },
    },
  });
}

const claimsOf = (sim: SandboxdSim) => sim.requests.filter((r) => r.route === "claim");
const lastClaim = (sim: SandboxdSim) => claimsOf(sim).at(-1)?.body as Record<string, unknown>;
const warm = (pools: Record<string, number>) =>
  Object.entries(pools).map(([k, w]) => {
    const [net, size] = k.split("/");
    return { template: IMG, net, size, warm: w, target: w };
  });

async function create(body: string): Promise<{ code: number; obj?: Obj; stderr: string }> {
  const r = await k(["create", "-f", "-", "-o", "json"], body);
  return { code: r.code, stderr: r.stderr, ...(r.code === 0 ? { obj: JSON.parse(r.stdout) as Obj } : {}) };
}

describe("create (claim) through the aggregator", () => {
  beforeAll(async () => {
    // n1 is warm for small/medium/large/egress, n2 for nothing: placement is decided by the inventories.
    await stack.publishSeen({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 2, "none/medium": 2, "none/large": 2, "egress/small": 2 }) });
    await stack.publishSeen({ node: "n2", address: n2.addr, publishedAt: now(), pools: [] });
  });

  test("7: kubectl create -f claims at the warm node with claim_ref <ns>/<name>, net none, size small; the reply carries claim-id/address/token/deadline and nodeName", async () => {
    const r = await create(sandbox("seven"));
    expect(r.stderr).toBe("");
    const body = lastClaim(n1);
    expect(body).toMatchObject({ template: IMG, net: "none", size: "small", claim_ref: "default/seven" });
    expect(body.ttl_seconds).toBeUndefined();
    const a = r.obj!.metadata.annotations!;
    expect(a["sandbox.cocoonstack.io/claim-id"]).toMatch(/^sb/);
    expect(a["sandbox.cocoonstack.io/address"]).toBeTruthy();
    expect(a["sandbox.cocoonstack.io/token"]).toBeTruthy();
    expect(a["sandbox.cocoonstack.io/deadline"]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(r.obj!.status.nodeName).toBe("n1");
    expect(n1.claims().some((c) => c.id === a["sandbox.cocoonstack.io/claim-id"] && c.claimRef === "default/seven")).toBe(true);
  });

  test("8: requests cpu 2 / memory 1Gi claim medium; only limits.cpu 5 claims large", async () => {
    await create(sandbox("eight-a", { resources: { requests: { cpu: "2", memory: "1Gi" } } }));
    expect(lastClaim(n1).size).toBe("medium");
    await create(sandbox("eight-b", { resources: { limits: { cpu: "5" } } }));
    expect(lastClaim(n1).size).toBe("large");
  });

  test("9: the net annotation on the pod template gives net egress; one on the object itself wins", async () => {
    await create(sandbox("nine-a", { podAnnotations: { "sandbox.cocoonstack.io/net": "egress" } }));
    expect(lastClaim(n1).net).toBe("egress");
    await create(sandbox("nine-b", { annotations: { "sandbox.cocoonstack.io/net": "none" }, podAnnotations: { "sandbox.cocoonstack.io/net": "egress" } }));
    expect(lastClaim(n1).net).toBe("none");
  });

  test("10: shutdownTime now+90.2s asks ttl_seconds 91; a past time or ttl-seconds -1 is a 400 with no node call", async () => {
    const before = claimsOf(n1).length;
    // kubectl takes a few hundred ms to send; aim the fraction so the ceiling is 91 on arrival.
    await create(sandbox("ten", { shutdownTime: new Date(Date.now() + 90_800).toISOString() }));
    expect([90, 91]).toContain(lastClaim(n1).ttl_seconds as number);
    const past = await create(sandbox("ten-past", { shutdownTime: "2020-01-01T00:00:00Z" }));
    expect(past.code).not.toBe(0);
    expect(past.stderr).toContain("spec.shutdownTime 2020-01-01T00:00:00Z is not in the future");
    const neg = await create(sandbox("ten-neg", { annotations: { "sandbox.cocoonstack.io/ttl-seconds": "-1" } }));
    expect(neg.stderr).toContain('invalid sandbox.cocoonstack.io/ttl-seconds="-1": want a non-negative integer of seconds');
    expect(claimsOf(n1).length).toBe(before + 1);
  });

  test("11: no warm capacity for the key is a 503 naming the template/net/size triple", async () => {
    const r = await create(sandbox("eleven", { image: "nothing:warm" }));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('no warm sandbox available for pool (template="nothing:warm" net="none" size="small")');
  });

  test("12: generateName twice, or one explicit name twice, both succeed with distinct claim-ids", async () => {
    const a = await create(sandbox({ generateName: "job-" }));
    const b = await create(sandbox({ generateName: "job-" }));
    expect(a.obj!.metadata.name).toMatch(/^job-[a-z0-9]{5}$/);
    expect(b.obj!.metadata.name).not.toBe(a.obj!.metadata.name);
    const c = await create(sandbox("twice"));
    const d = await create(sandbox("twice"));
    const ids = [a, b, c, d].map((x) => x.obj!.metadata.annotations!["sandbox.cocoonstack.io/claim-id"]);
    expect(new Set(ids).size).toBe(4);
  });

  test("13: --dry-run=server on create, delete or a subresource is a 400 and no node call", async () => {
    const before = n1.requests.length;
    const c = await k(["create", "-f", "-", "--dry-run=server"], sandbox("thirteen"));
    expect(c.code).not.toBe(0);
    expect(c.stderr).toContain("dry-run is not supported for sandbox mutations");
    await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 2 }), entries: [{ name: "default/dry", id: "sb_dry", phase: "Running" }] });
    await waitFor("sandbox dry", async () => (await k(["get", "sandbox", "dry"])).code === 0, 10_000);
    const d = await k(["delete", "sandbox", "dry", "--dry-run=server"]);
    expect(d.stderr).toContain("dry-run is not supported for sandbox mutations");
    const v = await k(["create", "--raw", "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/dry/pause?dryRun=All", "-f", "-"], "{}");
    expect(v.stderr).toContain("dry-run is not supported for sandbox mutations");
    expect(n1.requests.length).toBe(before);
  });
});

describe("placement failures and redirects", () => {
  beforeAll(async () => {
    n1.clearFaults();
    n2.clearFaults();
  });

  test("14: n1 answering 429, 500 or refusing connections sends every create to the warm n2", async () => {
    await stack.publishSeen({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 50 }) });
    await stack.publishSeen({ node: "n2", address: n2.addr, publishedAt: now(), pools: warm({ "none/small": 1 }) });
    for (const status of [429, 500]) {
      n1.fail("claim", status, { error: "injected" }, Infinity);
      for (let i = 0; i < 3; i++) {
        const r = await create(sandbox(`fourteen-${status}-${i}`));
        expect(r.stderr).toBe("");
        expect(r.obj!.status.nodeName).toBe("n2");
      }
      n1.clearFaults();
    }
    // A node that refuses connections: an inventory address nobody listens on.
    await stack.publishSeen({ node: "n1", address: "127.0.0.1:1", publishedAt: now(), pools: warm({ "none/small": 50 }) });
    const r = await create(sandbox("fourteen-refused"));
    expect(r.obj!.status.nodeName).toBe("n2");
  });

  test("15: the only candidate answering 401 makes create a 500 and no other node is tried", async () => {
    await stack.publishSeen({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }) });
    await stack.publishSeen({ node: "n2", address: n2.addr, publishedAt: now(), pools: [] });
    n1.fail("claim", 401, { error: "bad token" }, 1);
    const before = claimsOf(n2).length;
    const r = await create(sandbox("fifteen"));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("InternalError");
    expect(r.stderr).toContain("claim sandbox default/fifteen");
    expect(claimsOf(n2).length).toBe(before);
  });

  test("16: a redirect to n2 claims there with no_redirect and n2 owns it; a target no inventory advertises is skipped (503)", async () => {
    await stack.publishSeen({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }) });
    await stack.publishSeen({ node: "n2", address: n2.addr, publishedAt: now(), pools: [] });
    n1.forceRedirect([n2.addr]);
    try {
      const r = await create(sandbox("sixteen"));
      expect(r.stderr).toBe("");
      expect(r.obj!.status.nodeName).toBe("n2");
      expect(lastClaim(n2)).toMatchObject({ no_redirect: true, claim_ref: "default/sixteen" });
      n1.forceRedirect(["127.0.0.1:9"]);
      const before = claimsOf(n2).length;
      // A raw POST: kubectl would honour the 503's Retry-After and retry ten times (capacity.test.ts covers that).
      const miss = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes", { method: "POST", headers: { "content-type": "application/json" }, body: sandbox("sixteen-unknown") });
      expect(miss.status).toBe(503);
      expect(((await miss.json()) as { message: string }).message).toContain("no warm sandbox available");
      expect(claimsOf(n2).length).toBe(before);
    } finally {
      n1.forceRedirect(null);
    }
  });
});

describe("reads of unpublished sandboxes, delete and verbs", () => {
  test("17: a just-created, unpublished sandbox is readable by name through the claim_ref live lookup; an unknown name is 404 within about 1 s even when nodes stall", async () => {
    await stack.publishSeen({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }) });
    await stack.publishSeen({ node: "n2", address: n2.addr, publishedAt: now(), pools: [] });
    // Claimed behind the apiserver's back (another replica's create): only the node knows it.
    const res = await fetch(`${n1.url}/v1/claim`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ template: IMG, claim_ref: "default/seventeen" }) });
    expect(res.status).toBe(200);
    const got = await k(["get", "sandbox", "seventeen", "-o", "json"]);
    expect(got.code).toBe(0);
    expect(JSON.parse(got.stdout).status.nodeName).toBe("n1");
    n1.hang("list", Infinity);
    n2.hang("list", Infinity);
    try {
      const miss = await k(["get", "sandbox", "nobody-has-this"]);
      expect(miss.stderr).toContain('sandboxes.agents.x-k8s.io "nobody-has-this" not found');
      // Timed without kubectl's own start-up: the live lookups give up after 500 ms however long the nodes stall.
      const started = Date.now();
      const r = await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/nobody-has-this");
      expect(r.status).toBe(404);
      expect(Date.now() - started).toBeLessThan(1500);
    } finally {
      n1.clearFaults();
      n2.clearFaults();
    }
  });

  test("18: kubectl delete releases the claim id with the fleet token, answers 200, and returns after the next publish drops it", async () => {
    const c = await create(sandbox("eighteen"));
    const id = c.obj!.metadata.annotations!["sandbox.cocoonstack.io/claim-id"]!;
    await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [{ name: "default/eighteen", id, phase: "Running" }] });
    await waitFor("sandbox eighteen", async () => (await k(["get", "sandbox", "eighteen"])).code === 0, 10_000);
    const del = kubectl(["delete", "sandbox", "eighteen", "--timeout=20s"], { kubeconfig: stack.admin, timeoutMs: 25_000 });
    await waitFor("release", () => n1.requests.some((r) => r.route === "release" && r.path.includes(id)), 10_000);
    const rel = n1.requests.find((r) => r.route === "release" && r.path.includes(id))!;
    expect(rel.auth).toBe("root");
    // The node republishes without the entry: the pinned watch reports DELETED and kubectl returns.
    await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [] });
    const r = await del;
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('sandbox.agents.x-k8s.io "eighteen" deleted');
  }, 30_000);

  test("19: deleting an entry without id is a 500 naming the claim-id annotation and no release; a release answering 404 still succeeds", async () => {
    await stack.publish({
      node: "n1",
      address: n1.addr,
      publishedAt: now(),
      pools: warm({ "none/small": 5 }),
      entries: [
        { name: "default/no-id", phase: "Running" },
        { name: "default/gone", id: "sb_already_gone", phase: "Running" },
      ],
    });
    await waitFor("sandbox gone", async () => (await k(["get", "sandbox", "gone"])).code === 0, 10_000);
    const releases = () => n1.requests.filter((r) => r.route === "release").length;
    const before = releases();
    const r = await k(["delete", "sandbox", "no-id", "--wait=false"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("sandbox.cocoonstack.io/claim-id");
    expect(releases()).toBe(before);
    const g = await k(["delete", "sandbox", "gone", "--wait=false"]);
    expect(g.code).toBe(0);
    expect(releases()).toBe(before + 1);
  });

  test("20: kubectl patch, label and edit of anything but spec.operatingMode are 422 Invalid naming the field", async () => {
    const p = await k(["patch", "sandbox", "gone", "--type=merge", "-p", '{"metadata":{"labels":{"a":"b"}}}']);
    expect(p.code).not.toBe(0);
    expect(p.stderr).toContain('"gone" is invalid: metadata.labels: Forbidden: only spec.operatingMode may change');
    const l = await k(["label", "sandbox", "gone", "a=b"]);
    expect(l.stderr).toContain("only spec.operatingMode may change");
    // kubectl edit prints the Status message, not its reason.
    // kubectl edit runs $KUBE_EDITOR on the object's YAML, then PATCHes the difference.
    const editor = join(stack.dir, "edit.sh");
    writeFileSync(editor, `#!/bin/sh\nsed -i 's/cocoonstack.io\\/phase: Running/cocoonstack.io\\/phase: Edited/' "$1"\n`, { mode: 0o755 });
    const e = await kubectl(["edit", "sandbox", "gone"], { kubeconfig: stack.admin, timeoutMs: 15_000, env: { KUBE_EDITOR: editor } });
    expect(e.code).not.toBe(0);
    // kubectl edit prints only the Status line of an Invalid, not its causes.
    expect(e.stderr).toContain('sandboxes.agents.x-k8s.io "gone" is invalid');
    expect(e.stderr).toContain("no valid changes were saved");
  });

  test("issue 28.3: spec.operatingMode Suspended hibernates the node's claim and Running wakes it (merge, strategic and JSON patch); the Mode column, the Suspended condition and the Paused/Resumed Events follow the node's phase, a sandbox asleep by itself included", async () => {
    const c = await create(sandbox("sleeper"));
    const id = c.obj!.metadata.annotations!["sandbox.cocoonstack.io/claim-id"]!;
    const publish = (phase: string) => stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [{ name: "default/sleeper", id, phase }] });
    const modeRow = async () => (await k(["get", "sandbox", "sleeper", "--no-headers"])).stdout.trim().split(/\s+/).slice(1, 3).join(" ");
    /** The sandbox's Events as kubectl lists them: reason -> how many times (an identical Event is one object whose count grows). */
    const events = async (): Promise<Record<string, number>> => {
      const r = await k(["get", "events", "-n", "default", "--field-selector", "involvedObject.kind=Sandbox,involvedObject.name=sleeper", "-o", "json"]);
      const items = (JSON.parse(r.stdout) as { items: { reason: string; type: string; message: string; count?: number; involvedObject: Record<string, string> }[] }).items;
      for (const e of items) {
        expect([e.type, e.involvedObject.apiVersion, e.involvedObject.kind, e.involvedObject.namespace]).toEqual(["Normal", "agents.x-k8s.io/v1beta1", "Sandbox", "default"]);
        if (e.reason === "Paused") expect(e.message).toBe(`hibernated on node "n1" (claim id ${id})`);
        if (e.reason === "Resumed") expect(e.message).toBe(`woken on node "n1" (claim id ${id})`);
      }
      const out: Record<string, number> = {};
      for (const e of items) out[e.reason] = (out[e.reason] ?? 0) + (e.count ?? 1);
      return out;
    };
    const eventsReach = (want: Record<string, number>) =>
      waitFor(`sleeper's Events ${JSON.stringify(want)}`, async () => {
        const got = await events();
        return Object.entries(want).every(([r, n]) => got[r] === n) ? got : undefined;
      }, 15_000, 50);
    await publish("Running");
    await waitFor("sandbox sleeper running", async () => (await modeRow()) === "Running Running", 10_000);
    await eventsReach({ Claimed: 1 });
    const nodeVerbs = () => n1.requests.filter((r) => r.path.startsWith(`/v1/sandboxes/${id}/`)).map((r) => r.route);

    const suspend = await k(["patch", "sandbox", "sleeper", "--type=merge", "-p", '{"spec":{"operatingMode":"Suspended"}}']);
    expect([suspend.code, suspend.stderr]).toEqual([0, ""]);
    expect(suspend.stdout).toContain("sandbox.agents.x-k8s.io/sleeper patched");
    expect(nodeVerbs()).toEqual(["hibernate"]);
    expect(n1.claims().find((x) => x.id === id)!.state).toBe("hibernated");
    // The node republishes it hibernated: Phase Hibernated, Mode Suspended, condition Suspended=True, a Paused Event.
    await publish("Hibernated");
    await waitFor("Mode Suspended", async () => (await modeRow()) === "Hibernated Suspended", 10_000);
    const cond = await k(["get", "sandbox", "sleeper", "-o", 'jsonpath={.spec.operatingMode} {.status.conditions[?(@.type=="Suspended")].status} {.status.conditions[?(@.type=="Suspended")].reason}']);
    expect(cond.stdout).toBe("Suspended True Hibernated");
    expect(await eventsReach({ Claimed: 1, Paused: 1 })).toEqual({ Claimed: 1, Paused: 1 });
    // The same mode again is a no-op: no node call, and no Event (nothing changed on the node).
    expect((await k(["patch", "sandbox", "sleeper", "--type=merge", "-p", '{"spec":{"operatingMode":"Suspended"}}'])).code).toBe(0);
    expect(nodeVerbs()).toEqual(["hibernate"]);

    // kubectl's default patch type (strategic merge) wakes it.
    const resume = await k(["patch", "sandbox", "sleeper", "-p", '{"spec":{"operatingMode":"Running"}}']);
    expect([resume.code, resume.stderr]).toEqual([0, ""]);
    expect(nodeVerbs()).toEqual(["hibernate", "wake"]);
    expect(n1.claims().find((x) => x.id === id)!.state).toBe("running");
    await publish("Running");
    await waitFor("Mode Running", async () => (await modeRow()) === "Running Running", 10_000);
    expect(await eventsReach({ Paused: 1, Resumed: 1 })).toEqual({ Claimed: 1, Paused: 1, Resumed: 1 });
    // kubectl describe shows them under the sandbox.
    const described = await k(["describe", "sandbox", "sleeper"]);
    for (const r of ["Claimed", "Paused", "Resumed"]) expect(described.stdout).toMatch(new RegExp(`Normal\\s+${r}\\s`));

    // A JSON patch works too; a bad value is a 422 naming the supported values, and reaches no node.
    const json = await k(["patch", "sandbox", "sleeper", "--type=json", "-p", '[{"op":"replace","path":"/spec/operatingMode","value":"Suspended"}]']);
    expect(json.code).toBe(0);
    expect(nodeVerbs()).toEqual(["hibernate", "wake", "hibernate"]);
    const bad = await k(["patch", "sandbox", "sleeper", "--type=merge", "-p", '{"spec":{"operatingMode":"Asleep"}}']);
    expect(bad.stderr).toContain('spec.operatingMode: Unsupported value: "Asleep": supported values: "Running", "Suspended"');
    const other = await k(["patch", "sandbox", "sleeper", "--type=merge", "-p", '{"spec":{"operatingMode":"Running","shutdownTime":"2030-01-01T00:00:00Z"}}']);
    expect(other.stderr).toContain("spec.shutdownTime: Forbidden: only spec.operatingMode may change");
    expect(nodeVerbs()).toEqual(["hibernate", "wake", "hibernate"]);
    await publish("Hibernated");
    await eventsReach({ Paused: 2, Resumed: 1 });
    expect((await k(["patch", "sandbox", "sleeper", "--type=merge", "-p", '{"spec":{"operatingMode":"Running"}}'])).code).toBe(0);
    await publish("Running");
    await eventsReach({ Paused: 2, Resumed: 2 });

    // A sandbox the node puts to sleep by itself (its own hibernate, as its idle sweep does: no verb from this API)
    // reads Suspended the same way, and gets the same Paused Event: the mode and the Event follow the node's phase.
    const verbsBefore = nodeVerbs().length;
    n1.hibernate(id);
    expect(n1.claims().find((x) => x.id === id)!.state).toBe("hibernated");
    await publish("Hibernated");
    await waitFor("Mode Suspended again", async () => (await modeRow()) === "Hibernated Suspended", 10_000);
    expect(await eventsReach({ Paused: 3, Resumed: 2 })).toEqual({ Claimed: 1, Paused: 3, Resumed: 2 });
    expect(nodeVerbs()).toHaveLength(verbsBefore);
    const mode = await k(["get", "sandbox", "sleeper", "-o", 'jsonpath={.spec.operatingMode} {.status.conditions[?(@.type=="Suspended")].status}']);
    expect(mode.stdout).toBe("Suspended True");
  }, 90_000);

  const post = (path: string, body: unknown) => k(["create", "--raw", `/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/${path}`, "-f", "-"], JSON.stringify(body));

  test("21: pause then resume hibernate then wake the node's claim, both 201 with the options kind; a node 409 is a 409 with its message", async () => {
    const c = await create(sandbox("twentyone"));
    const id = c.obj!.metadata.annotations!["sandbox.cocoonstack.io/claim-id"];
    await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [{ name: "default/twentyone", id, phase: "Running" }] });
    await waitFor("sandbox twentyone", async () => (await k(["get", "sandbox", "twentyone"])).code === 0, 10_000);
    const p = await post("twentyone/pause", { apiVersion: "agents.x-k8s.io/v1beta1", kind: "SandboxPauseOptions" });
    expect(JSON.parse(p.stdout).kind).toBe("SandboxPauseOptions");
    const w = await post("twentyone/resume", { apiVersion: "agents.x-k8s.io/v1beta1", kind: "SandboxResumeOptions" });
    expect(JSON.parse(w.stdout).kind).toBe("SandboxResumeOptions");
    const verbs = n1.requests.filter((r) => r.path.startsWith(`/v1/sandboxes/${id}/`)).map((r) => r.route);
    expect(verbs).toEqual(["hibernate", "wake"]);
    n1.fail("hibernate", 409, { error: "egress lane sandboxes cannot hibernate" }, 1);
    const conflict = await post("twentyone/pause", {});
    expect(conflict.stderr).toContain("egress lane sandboxes cannot hibernate");
    expect(conflict.stderr).toMatch(/Conflict|409/);
  });

  test("22: fork {count:2, ttlSeconds:60} forks two children on the source node with claim_ref_prefix <ns>/; count -1 is a 400", async () => {
    const f = await post("twentyone/fork", { apiVersion: "agents.x-k8s.io/v1beta1", kind: "SandboxForkOptions", count: 2, ttlSeconds: 60 });
    const res = JSON.parse(f.stdout);
    expect(res.children).toHaveLength(2);
    for (const ch of res.children) expect(ch.nodeName).toBe("n1");
    const req = n1.requests.filter((r) => r.route === "fork").at(-1)!;
    expect(req.body).toMatchObject({ count: 2, ttl_seconds: 60, claim_ref_prefix: "default/" });
    const bad = await post("twentyone/fork", { count: -1 });
    expect(bad.stderr).toContain("count must be >= 1, got -1");
  });

  test("23: snapshot {name: before} checkpoints as default/before and echoes before; a 60-character name is a 400", async () => {
    const r = await post("twentyone/snapshot", { apiVersion: "agents.x-k8s.io/v1beta1", kind: "SandboxSnapshotOptions", name: "before" });
    const res = JSON.parse(r.stdout);
    expect(res.name).toBe("before");
    expect(res.nodeName).toBe("n1");
    expect(n1.requests.filter((x) => x.route === "checkpoint").at(-1)!.body).toMatchObject({ name: "default/before" });
    const long = await post("twentyone/snapshot", { name: "x".repeat(60) });
    expect(long.stderr).toContain("at most 55 characters in namespace \"default\"");
  });
});

describe("watch", () => {
  test("24: kubectl get -w reports ADDED, MODIFIED and DELETED within about 1 s of each publish (a claim and a release made behind its back)", async () => {
    await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [] });
    // A sandbox already in the namespace: its ADDED line shows kubectl has listed and is watching, so what is timed
    // below is the publish reaching the watch, not kubectl's start-up (seconds on a loaded machine).
    await stack.publish({ node: "n2", address: n2.addr, publishedAt: now(), pools: [], entries: [{ name: "watchers/w0", id: "sb_w0", phase: "Running" }] });
    const w = await kubectlStream(["get", "sandboxes", "-w", "--output-watch-events", "-n", "watchers"], { kubeconfig: stack.admin });
    try {
      await w.waitFor(/ADDED\s+w0/, 20_000);
      const claimed = (await (await fetch(`${n1.url}/v1/claim`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ template: IMG, claim_ref: "watchers/w1" }) })).json()) as { id: string; deadline: string };
      const entry = { name: "watchers/w1", id: claimed.id, phase: "Running", deadline: "2026-12-31T00:00:00Z" };
      let t = Date.now();
      await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [entry] });
      await w.waitFor(/ADDED\s+w1/, 5000);
      expect(Date.now() - t).toBeLessThan(2500);
      t = Date.now();
      await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [{ ...entry, deadline: "2027-01-01T00:00:00Z" }] });
      await w.waitFor(/MODIFIED\s+w1/, 5000);
      expect(Date.now() - t).toBeLessThan(2500);
      const rel = await fetch(`${n1.url}/v1/sandboxes/${claimed.id}/release`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` } });
      expect(rel.status).toBe(204);
      t = Date.now();
      await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [] });
      await w.waitFor(/DELETED\s+w1/, 5000);
      expect(Date.now() - t).toBeLessThan(2500);
    } finally {
      await w.stop();
      await stack.publish({ node: "n2", address: n2.addr, publishedAt: now(), pools: [] });
    }
  }, 45_000);

  test("24b: one republish reaches 40 watches through the aggregator (namespaced, label-selected, Table, pinned, every namespace), each with exactly its own events; a republish that changes no sandbox sends none", async () => {
    const entries = (deadline: string) => [
      { name: "fan/a", id: "sb_fa", phase: "Running", deadline },
      { name: "fan/b", id: "sb_fb", phase: "Hibernated" },
    ];
    await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: entries("2026-12-31T00:00:00Z") });
    await waitFor("sandbox fan/b", async () => (await k(["get", "sandbox", "b", "-n", "fan"])).code === 0, 10_000);
    const base = "/apis/agents.x-k8s.io/v1beta1";
    const TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io";
    const specs: { path: string; accept?: string; added: number; want: string[] }[] = [
      ...Array.from({ length: 35 }, () => ({ path: `${base}/namespaces/fan/sandboxes?watch=true`, added: 2, want: ["MODIFIED a", "ADDED c", "DELETED b"] })),
      { path: `${base}/namespaces/fan/sandboxes?watch=true&labelSelector=sandbox.cocoonstack.io%2Fphase%3DRunning`, added: 1, want: ["MODIFIED a", "ADDED c"] },
      { path: `${base}/namespaces/fan/sandboxes?watch=true`, accept: TABLE, added: 2, want: ["MODIFIED a", "ADDED c", "DELETED b"] },
      { path: `${base}/namespaces/fan/sandboxes?watch=true&fieldSelector=metadata.name%3Da`, added: 1, want: ["MODIFIED a"] },
      { path: `${base}/namespaces/fan/sandboxes?watch=true&fieldSelector=metadata.name%3Db`, added: 1, want: ["DELETED b"] },
      { path: `${base}/sandboxes?watch=true&fieldSelector=metadata.namespace%3Dfan`, added: 2, want: ["MODIFIED a", "ADDED c", "DELETED b"] },
    ];
    let armed = false;
    const watches = await Promise.all(
      specs.map(async (s) => {
        const res = await stack.cluster.adminFetch(s.path, { headers: { accept: s.accept ?? "application/json" } });
        expect(res.status).toBe(200);
        const w = { ...s, initial: 0, seen: [] as string[], tables: 0 };
        const reading = readLines(res, (line) => {
          const e = JSON.parse(line) as { type: string; object: { kind: string; metadata?: { name?: string }; rows?: { object: { metadata: { name: string } } }[] } };
          const name = e.object.kind === "Table" ? e.object.rows?.[0]?.object.metadata.name : e.object.metadata?.name;
          if (e.object.kind === "Table") w.tables++;
          if (armed) w.seen.push(`${e.type} ${name}`);
          else w.initial++;
        });
        return { w, reading };
      }),
    );
    try {
      // Every watch past its initial ADDED events.
      await waitFor("every watch past its initial events", () => watches.every(({ w }) => w.initial >= w.added), 10_000);
      armed = true;
      // A republish with a new publishedAt and the same sandboxes: no event anywhere.
      await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: entries("2026-12-31T00:00:00Z") });
      // Then a changes, b goes (no live row on n1 either), c comes.
      await stack.publish({
        node: "n1",
        address: n1.addr,
        publishedAt: now(),
        pools: warm({ "none/small": 5 }),
        entries: [entries("2027-01-01T00:00:00Z")[0]!, { name: "fan/c", id: "sb_fc", phase: "Running" }],
      });
      await waitFor("every watch to see the change", () => watches.every(({ w }) => w.seen.length >= w.want.length), 10_000);
      await Bun.sleep(300); // nothing more arrives
      for (const { w } of watches) expect(w.seen.sort()).toEqual([...w.want].sort());
      expect(watches.find(({ w }) => w.accept)!.w.tables).toBeGreaterThan(0);
    } finally {
      await Promise.all(watches.map(({ reading }) => reading.stop()));
      await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [] });
    }
  }, 30_000);

  test("25: sendInitialEvents=true ends the initial ADDED events with a BOOKMARK annotated k8s.io/initial-events-end", async () => {
    await stack.publishSeen({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 5 }), entries: [{ name: "bm/a", id: "sb_a", phase: "Running" }, { name: "bm/b", id: "sb_b", phase: "Running" }] });
    const r = await k(["get", "--raw", "/apis/agents.x-k8s.io/v1beta1/namespaces/bm/sandboxes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=2"]);
    const events = r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { type: string; object: { metadata: { name?: string; annotations?: Record<string, string> } } });
    expect(events.map((e) => e.type).slice(0, 3)).toEqual(["ADDED", "ADDED", "BOOKMARK"]);
    expect(events[2]!.object.metadata.annotations).toEqual({ "k8s.io/initial-events-end": "true" });
  });

  test("26: kubectl wait --for=condition=Ready on a created, not yet published sandbox succeeds", async () => {
    const c = await create(sandbox("twentysix"));
    expect(c.code).toBe(0);
    const r = await kubectl(["wait", "--for=condition=Ready", "sandbox/twentysix", "--timeout=15s"], { kubeconfig: stack.admin, timeoutMs: 20_000 });
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("condition met");
  });
});

describe("schema-driven kubectl", () => {
  test("kubectl explain sandboxes describes the kind and its fields", async () => {
    const r = await k(["explain", "sandboxes"]);
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("KIND:       Sandbox");
    expect(r.stdout).toContain("GROUP:      agents.x-k8s.io");
    expect(r.stdout).toMatch(/spec\s+<Object>/);
    const spec = await k(["explain", "sandboxes.spec.shutdownTime"]);
    expect(spec.stdout).toContain("Absolute lease end");
  });

  test("kubectl apply of a new name creates it (GET 404, then POST); a strict unknown field is a 400 naming it", async () => {
    const r = await k(["apply", "-f", "-"], sandbox("applied"));
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("sandbox.agents.x-k8s.io/applied created");
    const bad = JSON.parse(sandbox("strict-bad"));
    bad.spec.bogusField = 1;
    const s = await k(["create", "-f", "-"], JSON.stringify(bad));
    expect(s.code).not.toBe(0);
    expect(s.stderr).toContain("bogusField");
  });
});
