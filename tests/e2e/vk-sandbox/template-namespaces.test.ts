// Issue 27 (high): a Pod annotated with another namespace's built template made vk-sandbox claim a clone of it, and
// so read that namespace's build (files, env). The e2b surface promotes builds as `e2b/<namespace>/<name>` (step
// cache entries `e2b/<namespace>/_c-<key>`); vk-sandbox now claims such a template only for a Pod of that namespace,
// and never a cache entry (shared/built-templates, docs/decisions.md "Built templates belong to their namespace").
// The daemon is its own process on a real kube-apiserver, as installed; the simulator holds the templates.
import { describe, expect, test } from "bun:test";
import { SandboxdClient } from "#shared/sandboxd/index.ts";
import { runningWithClaim, sandboxPod } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import { SANDBOXD_TOKEN, simClaimsFor, useE2eStack } from "./stack.ts";

const NODE = "vk-templates";
const PAYROLL = "e2b/team-b/payroll";
const CACHE_ENTRY = "e2b/team-a/_c-0123456789abcdef0123456789abcdef";

const env = useE2eStack({
  node: NODE,
  sim: { pools: ["base=4"] },
  prepare: async (e2e) => {
    for (const ns of ["team-a", "team-b"]) await e2e.cluster.createNamespace(ns);
  },
});

/** Promote a fresh claim of `base` as `template` on the node, as the e2b surface's build does (root token, unowned). */
async function promoted(template: string): Promise<void> {
  const client = new SandboxdClient({ baseUrl: env.stack.sim.url, token: SANDBOXD_TOKEN });
  const src = await client.claim({ template: "base", claim_ref: `e2b-build/${template.replace(/[^a-z0-9]+/g, "-")}` });
  await client.promote(src.id, { template });
  await client.release(src.id);
}

const status = async (ns: string, name: string) => (await env.e2e.kube.pod(ns, name))?.status;
const warnings = async (ns: string, name: string) =>
  (await env.e2e.kube.events(ns)).filter((e) => e.involvedObject.name === name && e.type === "Warning").map((e) => e.reason);
const claimsOf = (template: string) => env.stack.sim.claims().filter((c) => c.key.template === template);

describe("issue 27: a Pod names a built template of its own namespace only", () => {
  test("a Pod in team-a naming team-b's template gets no claim: Pending/ProviderFailed naming the template, and a warning", async () => {
    await promoted(PAYROLL);
    await env.e2e.kube.createPod(sandboxPod("thief", NODE, { ns: "team-a", annotations: { "sandbox.cocoonstack.io/template": PAYROLL } }));
    const st = await waitFor("thief ProviderFailed", async () => {
      const s = await status("team-a", "thief");
      return s?.reason === "ProviderFailed" && s;
    });
    expect(st.phase).toBe("Pending");
    expect(st.message).toContain(`template "${PAYROLL}" belongs to namespace "team-b"`);
    expect(st.message).toContain(`not from "team-a"`);
    await waitFor("the warning", async () => (await warnings("team-a", "thief")).includes("ProviderCreateFailed"));
    expect(simClaimsFor(env.stack.sim, "team-a/thief")).toHaveLength(0);
    expect(claimsOf(PAYROLL)).toHaveLength(0);
  }, 60_000);

  test("spellings a node might match differently are refused too (case, blanks, a malformed name)", async () => {
    const spellings = [["upper", "E2B/team-b/payroll"], ["blank", " e2b/team-b/payroll"], ["short", "e2b/team-b"]] as const;
    for (const [name, template] of spellings) {
      await env.e2e.kube.createPod(sandboxPod(name, NODE, { ns: "team-a", annotations: { "sandbox.cocoonstack.io/template": template } }));
    }
    for (const [name] of spellings) {
      await waitFor(`${name} ProviderFailed`, async () => (await status("team-a", name))?.reason === "ProviderFailed");
      expect(simClaimsFor(env.stack.sim, `team-a/${name}`)).toHaveLength(0);
    }
  }, 90_000);

  test("a step cache entry is no template, even for its own namespace", async () => {
    await promoted(CACHE_ENTRY);
    await env.e2e.kube.createPod(sandboxPod("cache", NODE, { ns: "team-a", annotations: { "sandbox.cocoonstack.io/template": CACHE_ENTRY } }));
    const st = await waitFor("cache ProviderFailed", async () => {
      const s = await status("team-a", "cache");
      return s?.reason === "ProviderFailed" && s;
    });
    expect(st.message).toContain("is a build step cache entry, not a template");
    expect(claimsOf(CACHE_ENTRY)).toHaveLength(0);
  }, 60_000);

  test("a Pod in team-b names its own namespace's template and runs on a clone of it", async () => {
    await env.e2e.kube.createPod(sandboxPod("owner", NODE, { ns: "team-b", annotations: { "sandbox.cocoonstack.io/template": PAYROLL } }));
    const pod = await runningWithClaim(env.e2e.kube, "team-b", "owner");
    expect(pod.metadata?.annotations?.["sandbox.cocoonstack.io/template"]).toBe(PAYROLL);
    const claims = simClaimsFor(env.stack.sim, "team-b/owner");
    expect(claims).toHaveLength(1);
    expect(claims[0]!.key.template).toBe(PAYROLL);
  }, 60_000);
});
