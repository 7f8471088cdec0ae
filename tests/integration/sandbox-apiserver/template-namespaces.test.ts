// Issue 27 (high): a Sandbox image or a SandboxTemplate naming another namespace's built template made
// sandbox-apiserver claim (aggregated Create) or pool (warm-pool driver) clones of it. Built templates are promoted as
// `e2b/<namespace>/<name>` (step cache entries `e2b/<namespace>/_c-<key>`); an object may now name one of its own
// namespace only, never a cache entry (shared/built-templates), and the ValidatingAdmissionPolicy of
// manifests/template-admission.yaml refuses such a SandboxTemplate at the door (docs/decisions.md "Built templates
// belong to their namespace"). A real kube-apiserver, a sandbox-apiserver process, and the simulator holding the
// templates; the harness publishes the node's NodeInventory as vk-sandbox would.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/index.ts";
import { waitFor } from "#tests/support/wait.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "./fixture.ts";

const ROOT = "root-templates";
const IMG = "img:1";
const PAYROLL = "e2b/team-b/payroll";
const CACHE_ENTRY = "e2b/team-b/_c-0123456789abcdef0123456789abcdef";
const SANDBOXES = (ns: string) => `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`;
const TEMPLATES = (ns: string) => `/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxtemplates`;
// How long a started server may take to elect itself, sync and run a pass: a ceiling, every wait ends at its condition.
const CONVERGE_MS = 30_000;

let stack: Stack;
let sim: SandboxdSim;
let server: ApiserverProcess;
let publishing = true;
let publisher: Promise<void>;

/** Promote a fresh claim of the pool image as `template` on the node, as the e2b surface's build does. */
async function promoted(template: string): Promise<void> {
  const client = new SandboxdClient({ baseUrl: sim.url, token: ROOT });
  const src = await client.claim({ template: IMG, claim_ref: "e2b-build/src" });
  await client.promote(src.id, { template });
  await client.release(src.id);
}

const sandboxBody = (name: string, image: string) =>
  JSON.stringify({ apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name }, spec: { podTemplate: { spec: { containers: [{ name: "c", image }] } } } });

async function createSandbox(ns: string, name: string, image: string): Promise<{ status: number; body: { reason?: string; message?: string; details?: { name?: string } } }> {
  const r = await stack.cluster.adminFetch(SANDBOXES(ns), { method: "POST", body: sandboxBody(name, image), headers: { "content-type": "application/json" } });
  return { status: r.status, body: (await r.json()) as { reason?: string; message?: string } };
}

const templateObject = (ns: string, name: string, image: string) => ({
  apiVersion: "extensions.agents.x-k8s.io/v1beta1",
  kind: "SandboxTemplate",
  metadata: { name, namespace: ns },
  spec: { podTemplate: { spec: { containers: [{ name: "c", image }] } } },
});

async function postTemplate(ns: string, name: string, image: string): Promise<{ status: number; message: string }> {
  const r = await stack.cluster.adminFetch(TEMPLATES(ns), { method: "POST", body: JSON.stringify(templateObject(ns, name, image)), headers: { "content-type": "application/json" } });
  return { status: r.status, message: ((await r.json()) as { message?: string }).message ?? "" };
}

const claimsOf = (template: string) => sim.claims().filter((c) => c.key.template === template);
const simPoolTargets = () => new Map(sim.info().pools.map((p) => [p.key.template, p.target]));

beforeAll(async () => {
  stack = await startStack();
  for (const ns of ["team-a", "team-b"]) await stack.cluster.createNamespace(ns);
  sim = await startSandboxdSim({ rootToken: ROOT, pools: [`${IMG}/none/small=4`] });
  await waitFor("warm VMs", () => sim.info().pools.every((p) => p.warm > 0));
  await promoted(PAYROLL);
  await promoted(CACHE_ENTRY);
  // The harness plays vk-sandbox, republishing every second. It also advertises warm VMs of the built templates, as
  // a node would once a pool of them were kept: the aggregated Create claims only where the inventory shows warm.
  publisher = (async () => {
    while (publishing) {
      const pools = sim.info().pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target }));
      for (const t of [PAYROLL, CACHE_ENTRY]) if (!pools.some((p) => p.template === t)) pools.push({ template: t, net: "none", size: "small", warm: 2, target: 0 });
      await stack.publish({ node: "n1", address: sim.addr, publishedAt: rfc3339(Date.now()), pools });
      await Bun.sleep(1000);
    }
  })();
  // The driver PUTs each node its whole pool set: a pool of the image keeps it warm for the creates below.
  await stack.cluster.apply([
    templateObject("team-a", "plain", IMG),
    { apiVersion: "extensions.agents.x-k8s.io/v1beta1", kind: "SandboxWarmPool", metadata: { name: "plain", namespace: "team-a" }, spec: { replicas: 3, sandboxTemplateRef: { name: "plain" } } },
  ]);
  server = await stack.startServer({ args: [`--sandboxd-token=${ROOT}`, "--warm-pool-sync-interval=1s"] });
  await stack.register(server.port);
}, 90_000);

afterAll(async () => {
  publishing = false;
  await publisher;
  await server?.stop();
  await sim?.stop();
  await stack?.stop();
});

describe("the aggregated Create", () => {
  test("a Sandbox in team-a naming team-b's built template: 403 Forbidden naming the template and both namespaces, nothing claimed", async () => {
    // The server's fleet view follows the NodeInventory: wait until a plain create of the pool image is served.
    await waitFor("the fleet view", async () => (await createSandbox("team-a", "plain", IMG)).status === 201, CONVERGE_MS);
    const r = await createSandbox("team-a", "thief", PAYROLL);
    expect(r.status).toBe(403);
    expect(r.body.reason).toBe("Forbidden");
    expect(r.body.details?.name).toBe("thief");
    expect(r.body.message).toContain(`template "${PAYROLL}" belongs to namespace "team-b"`);
    expect(r.body.message).toContain(`not from "team-a"`);
    expect(claimsOf(PAYROLL)).toHaveLength(0);
  }, 60_000);

  test("a step cache entry, even of the Sandbox's own namespace, and a variant spelling: 422 Invalid, nothing claimed", async () => {
    const cache = await createSandbox("team-b", "cache", CACHE_ENTRY);
    expect(cache.status).toBe(422);
    expect(cache.body.reason).toBe("Invalid");
    expect(cache.body.message).toContain("is a build step cache entry, not a template");
    expect((await createSandbox("team-a", "upper", "E2B/team-b/payroll")).status).toBe(422);
    expect(claimsOf(CACHE_ENTRY)).toHaveLength(0);
  }, 60_000);

  test("a Sandbox of the template's own namespace is created on a clone of it", async () => {
    const r = await createSandbox("team-b", "owner", PAYROLL);
    expect(r.status).toBe(201);
    expect(claimsOf(PAYROLL).filter((c) => c.claimRef === "team-b/owner")).toHaveLength(1);
  }, 60_000);
});

describe("the warm-pool driver", () => {
  test("a pool whose SandboxTemplate names team-b's template from team-a is not served: no pool on the node, a TemplateRefused warning on the pool", async () => {
    // The fixture installs the chart's RBAC and policies, the built-template policy included: without its binding
    // the template can be stored, so this proves the driver's own check (the policy is the test below).
    await stack.cluster.adminFetch("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/sandbox-template-built-images", { method: "DELETE" }).then((r) => r.body?.cancel());
    await waitFor("the policy out of force", async () => (await postTemplate("team-a", "stolen", PAYROLL)).status === 201, CONVERGE_MS);
    await stack.cluster.apply([
      { apiVersion: "extensions.agents.x-k8s.io/v1beta1", kind: "SandboxWarmPool", metadata: { name: "stolen", namespace: "team-a" }, spec: { replicas: 2, sandboxTemplateRef: { name: "stolen" } } },
    ]);
    const event = await waitFor(
      "the TemplateRefused event on the pool",
      async () => {
        const list = (await (await stack.cluster.adminFetch("/api/v1/namespaces/team-a/events")).json()) as {
          items: { reason: string; type: string; message: string; involvedObject: { kind: string; name: string } }[];
        };
        return list.items.find((e) => e.reason === "TemplateRefused" && e.involvedObject.kind === "SandboxWarmPool" && e.involvedObject.name === "stolen");
      },
      CONVERGE_MS,
    );
    expect(event.type).toBe("Warning");
    expect(event.message).toContain(`template "${PAYROLL}" belongs to namespace "team-b"`);
    // A later pass (it carries the plain pool's new size) PUT the node its pool set: team-b's template is not in it.
    await stack.cluster.apply([{ apiVersion: "extensions.agents.x-k8s.io/v1beta1", kind: "SandboxWarmPool", metadata: { name: "plain", namespace: "team-a" }, spec: { replicas: 4, sandboxTemplateRef: { name: "plain" } } }]);
    await waitFor("a pass after the change", () => simPoolTargets().get(IMG) === 4, CONVERGE_MS);
    expect(simPoolTargets().has(PAYROLL)).toBe(false);
    const pool = (await (await stack.cluster.adminFetch("/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/team-a/sandboxwarmpools/stolen")).json()) as { status?: { readyReplicas?: number } };
    expect(pool.status?.readyReplicas ?? 0).toBe(0);
  }, 60_000);
});

describe("the ValidatingAdmissionPolicy on SandboxTemplate images (manifests/template-admission.yaml)", () => {
  // Applied by the first test, not a hook: bun runs a describe's beforeAll before the earlier describes' tests.
  const inForce = async () => {
    await stack.cluster.apply(readFileSync(join(import.meta.dir, "..", "..", "..", "manifests", "template-admission.yaml"), "utf8"));
    // The apiserver starts enforcing a new policy a moment after it is stored: wait for the refusal itself.
    await waitFor("the policy in force", async () => {
      const r = await postTemplate("team-a", "probe", PAYROLL);
      if (r.status === 201) await stack.cluster.adminFetch(`${TEMPLATES("team-a")}/probe`, { method: "DELETE" }).then((d) => d.body?.cancel());
      return r.status === 403;
    }, CONVERGE_MS);
  };

  test("another namespace's template, a cache entry (container or init container) and a variant spelling are refused with the image named", async () => {
    await inForce();
    const other = await postTemplate("team-a", "other", PAYROLL);
    expect(other.status).toBe(403);
    expect(other.message).toContain(`image ${PAYROLL} is not a built template of namespace team-a`);
    expect((await postTemplate("team-b", "cache", CACHE_ENTRY)).status).toBe(403);
    expect((await postTemplate("team-a", "upper", "E2B/team-b/payroll")).status).toBe(403);
    const init = { ...templateObject("team-a", "init", IMG) };
    init.spec.podTemplate.spec = { containers: [{ name: "c", image: IMG }], initContainers: [{ name: "i", image: PAYROLL }] } as typeof init.spec.podTemplate.spec;
    const r = await stack.cluster.adminFetch(TEMPLATES("team-a"), { method: "POST", body: JSON.stringify(init), headers: { "content-type": "application/json" } });
    expect(r.status).toBe(403);
  }, 60_000);

  test("a template of the object's own namespace and a pool image are admitted; an update to another namespace's is refused", async () => {
    expect((await postTemplate("team-b", "own", PAYROLL)).status).toBe(201);
    expect((await postTemplate("team-a", "image", IMG)).status).toBe(201);
    const current = (await (await stack.cluster.adminFetch(`${TEMPLATES("team-a")}/image`)).json()) as ReturnType<typeof templateObject> & { metadata: { resourceVersion: string } };
    current.spec.podTemplate.spec.containers[0]!.image = PAYROLL;
    const put = await stack.cluster.adminFetch(`${TEMPLATES("team-a")}/image`, { method: "PUT", body: JSON.stringify(current), headers: { "content-type": "application/json" } });
    expect(put.status).toBe(403);
  }, 60_000);
});
