// kubectl through the aggregator (the real client, the real kube-apiserver, our server behind an APIService), one
// test per spec §12 scenario it covers; the scenario number leads each name.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "../../../services/sandboxd-sim/sim.ts";
import { kubectl, kubectlStream } from "../../kube/kubectl.ts";
import { type ApiserverProcess, type Stack, eventually, rfc3339, startStack } from "./fixture.ts";

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
  test("1: kubectl api-resources lists sandboxes (namespaced, Sandbox, create/delete/get/list/watch) and the APIService is Available", async () => {
    const r = await k(["api-resources", "--api-group=agents.x-k8s.io", "-o", "wide"]);
    expect(r.stderr).toBe("");
    const line = r.stdout.split("\n").find((l) => /^sandboxes\s/.test(l));
    expect(line).toBeDefined();
    expect(line).toMatch(/agents\.x-k8s\.io\/v1beta1\s+true\s+Sandbox\s+create,delete,get,list,watch/);
    const svc = await k(["get", "apiservice", "v1beta1.agents.x-k8s.io", "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].status}"]);
    expect(svc.stdout).toBe("True");
  });

  test("2: GET /apis/agents.x-k8s.io/v1beta1 via kube-apiserver lists sandboxes and four sandboxes/<verb> entries with verbs [create]", async () => {
    const r = await k(["get", "--raw", "/apis/agents.x-k8s.io/v1beta1"]);
    const doc = JSON.parse(r.stdout) as { resources: { name: string; verbs: string[]; kind: string }[] };
    expect(doc.resources.map((x) => x.name).sort()).toEqual(["sandboxes", "sandboxes/fork", "sandboxes/pause", "sandboxes/resume", "sandboxes/snapshot"]);
    for (const sub of doc.resources.filter((x) => x.name.includes("/"))) expect(sub.verbs).toEqual(["create"]);
  });

  test("3: kubectl get sandboxes -A shows every entry of two fresh inventories sorted by namespace/name under NAME and CREATED AT", async () => {
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
    const out = await eventually(async () => {
      const r = await k(["get", "sandboxes", "-A"]);
      return r.stdout.split("\n").filter(Boolean).length === 4 ? r.stdout : undefined;
    }, 10_000, "3 rows");
    const lines = out.split("\n").filter(Boolean);
    expect(lines[0]).toMatch(/^NAMESPACE\s+NAME\s+CREATED AT$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 2).join("/"))).toEqual(["default/demo", "team-a/alpha", "team-b/zeta"]);
    expect(lines[1]).toContain("2026-07-06T10:00:00Z");
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
    const obj = await eventually(async () => {
      const r = await k(["get", "sandbox", "rich", "-o", "json"]);
      return r.code === 0 ? JSON.parse(r.stdout) : undefined;
    });
    expect(obj.metadata.labels).toEqual({
      "sandbox.cocoonstack.io/node": "n1",
      "sandbox.cocoonstack.io/phase": "Running",
      "sandbox.cocoonstack.io/template": IMG,
      "sandbox.cocoonstack.io/claim": "rich",
    });
    expect(obj.metadata.annotations).toEqual({ "sandbox.cocoonstack.io/claim-id": "sb_rich", "sandbox.cocoonstack.io/deadline": "2026-12-31T10:00:00Z" });
    expect(obj.status.podIPs).toEqual(["10.0.0.5"]);
    expect(obj.status.nodeName).toBe("n1");
    expect(obj.status.conditions).toEqual([{ type: "Ready", status: "True", reason: "Running", message: 'phase "Running" reported by node "n1" inventory' }]);
    const sleepy = JSON.parse((await k(["get", "sandbox", "sleepy", "-o", "json"])).stdout);
    expect(sleepy.status.conditions[0].status).toBe("False");
    expect(sleepy.status.conditions[0].reason).toBe("Hibernated");
    const yaml = await k(["get", "sandbox", "rich", "-o", "yaml"]);
    expect(yaml.stdout).toContain("kind: Sandbox");
    expect(yaml.stdout).toContain("nodeName: n1");
  });

  test("5: -l sandbox.cocoonstack.io/node=n1 lists only n1's entries; --field-selector status.nodeName works too", async () => {
    await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), entries: [{ name: "default/one", id: "sb_1", phase: "Running" }] });
    await stack.publish({ node: "n2", address: n2.addr, publishedAt: now(), entries: [{ name: "default/two", id: "sb_2", phase: "Running" }] });
    await eventually(async () => ((await k(["get", "sandboxes", "-o", "name"])).stdout.includes("two") ? true : undefined));
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
    await stack.publish({ node: "n1", address: n1.addr, publishedAt: now(), pools: warm({ "none/small": 2, "none/medium": 2, "none/large": 2, "egress/small": 2 }) });
    await stack.publish({ node: "n2", address: n2.addr, publishedAt: now(), pools: [] });
    await Bun.sleep(300); // the informer sees both publishes
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
    await eventually(async () => ((await k(["get", "sandbox", "dry"])).code === 0 ? true : undefined));
    const d = await k(["delete", "sandbox", "dry", "--dry-run=server"]);
    expect(d.stderr).toContain("dry-run is not supported for sandbox mutations");
    const v = await k(["create", "--raw", "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/dry/pause?dryRun=All", "-f", "-"], "{}");
    expect(v.stderr).toContain("dry-run is not supported for sandbox mutations");
    expect(n1.requests.length).toBe(before);
  });
});
