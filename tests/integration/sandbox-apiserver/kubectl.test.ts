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
    startSandboxdSim({ rootToken: ROOT, pools: [`${IMG}/none/small=2`] }),
    startSandboxdSim({ rootToken: ROOT, pools: [`${IMG}/none/small=2`] }),
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
});
