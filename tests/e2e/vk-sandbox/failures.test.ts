// What a failed create writes to the Pod, end to end (§11 scenarios 18–20): the pod controller's step 8 on a
// real kube-apiserver, with the sandboxd simulator refusing claims. The daemon is a separate process.
import { describe, expect, test } from "bun:test";
import { sandboxPod } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import { simClaimsFor, simRequests, useE2eStack } from "./stack.ts";

const NODE = "vk-failures";
const env = useE2eStack({ node: NODE });

const status = async (name: string) => (await env.e2e.kube.pod("ns", name))?.status;
const warnings = async (name: string) =>
  (await env.e2e.kube.events("ns")).filter((e) => e.involvedObject.name === name && e.type === "Warning").map((e) => e.reason);

describe("failed creates", () => {
  test.each([
    ["ttl abc", { "sandbox.cocoonstack.io/ttl-seconds": "abc" }],
    ["ttl -1", { "sandbox.cocoonstack.io/ttl-seconds": "-1" }],
    ["no template", { "sandbox.cocoonstack.io/template": "" }],
    ["runtime vk-cocoon", { "sandbox.cocoonstack.io/runtime": "vk-cocoon" }],
  ])("a pod with %s gets no claim, shows Pending/ProviderFailed and a ProviderCreateFailed warning", async (what, annotations) => {
    const name = `bad-${what.replace(/[^a-z0-9]+/g, "-")}`;
    await env.e2e.kube.createPod(sandboxPod(name, NODE, { annotations }));
    await waitFor(`${name} ProviderFailed`, async () => (await status(name))?.reason === "ProviderFailed");
    expect((await status(name))?.phase).toBe("Pending");
    await waitFor("warning", async () => (await warnings(name)).includes("ProviderCreateFailed"));
    expect(simClaimsFor(env.stack.sim, `ns/${name}`)).toHaveLength(0);
  }, 30_000);

  test("sandboxd at capacity (429) three times: a ProviderCreateFailed warning, backoff retries, then Running on one claim", async () => {
    env.stack.sim.fail("claim", 429, { error: "no warm capacity" }, 3);
    await env.e2e.kube.createPod(sandboxPod("busy", NODE));
    await waitFor("Running once capacity returns", async () => (await status("busy"))?.phase === "Running", 30_000);
    expect(simClaimsFor(env.stack.sim, "ns/busy")).toHaveLength(1);
    expect(await warnings("busy")).toContain("ProviderCreateFailed");
  }, 60_000);

  test("restartPolicy Never and 429: the pod ends Failed/ProviderFailed and no further claim is tried", async () => {
    env.stack.sim.fail("claim", 429, { error: "no warm capacity" }, 1000);
    try {
      const claims = simRequests(env.stack.sim, "claim");
      await env.e2e.kube.createPod(sandboxPod("never", NODE, { restartPolicy: "Never" }));
      await waitFor("Failed", async () => (await status("never"))?.phase === "Failed");
      expect((await status("never"))?.reason).toBe("ProviderFailed");
      await Bun.sleep(1_000); // a retry would come within the first backoff steps (5, 10, 20 ms …)
      expect(simRequests(env.stack.sim, "claim") - claims).toBe(1);
    } finally {
      env.stack.sim.clearFaults();
    }
  }, 60_000);
});
