// Issue 27 (high): the clone of a built template answered envd requests with no access token: whoever got a claim of
// it from a node (a Pod, a Sandbox, anything holding the node's root token) read the build's files and ENV with
// `GET /files` and `GET /envs`. A build now gives its sandbox's envd a token of its own before any step, so every
// template it promotes (the result and its step cache entries) holds one, and a clone answers nothing until whoever
// claimed it hands it its own token (instance metadata `accessTokenHash`, then `/init`), as the e2b create does
// (docs/decisions.md "Built templates belong to their namespace"). sandbox-e2b from its real flags, the simulator with
// its envd-compatible guests, the stock JS SDK.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { exchangeOverTunnel } from "#shared/relay/index.ts";
import { SandboxdClient } from "#shared/sandboxd/index.ts";
import { ROOT } from "../e2b/harness.ts";
import { type BuildStack, api, requestBuild, sdkOpts, startBuildStack, waitBuild } from "./support.ts";

let s: BuildStack;

beforeAll(async () => {
  s = await startBuildStack({ store: false, proxy: true });
}, 60_000);
afterAll(() => s?.stop());

/** A GET to the clone's envd over the node's ports relay, with no X-Access-Token (what a raw claim holder can do). */
async function envdGet(address: string, claimId: string, path: string): Promise<{ status: number; body: string }> {
  const r = await exchangeOverTunnel({ address, claimId, port: 49983, token: ROOT }, { method: "GET", path, headers: { host: "envd" }, timeoutMs: 5_000, maxBytes: 64 * 1024 });
  return { status: r.status, body: r.body.toString("utf8") };
}

test("a raw clone of a built template, and of its step cache entry, answers 401 without a token; an e2b create of it works, env merged", async () => {
  const b = await requestBuild(s, "payroll");
  const start = await api(s, "POST", `/v2/templates/payroll/builds/${b.buildID}`, {
    fromImage: "base",
    steps: [
      { type: "RUN", args: ["echo team-a-source > /home/user/secret.txt"] },
      { type: "ENV", args: ["PASSWORD", "hunter2"] },
    ],
  });
  expect(start.status).toBe(202);
  expect((await waitBuild(s, b)).status).toBe("ready");
  const node = s.cluster.nodes[0]!;
  const templates = (node.info().templates ?? []).map((t) => t.key.template);
  const cacheEntry = templates.find((t) => t.startsWith("e2b/team-a/_c-"));
  expect(templates).toContain("e2b/team-a/payroll");
  expect(cacheEntry).toBeDefined();

  const client = new SandboxdClient({ baseUrl: node.url, token: ROOT });
  for (const template of ["e2b/team-a/payroll", cacheEntry!]) {
    const clone = await client.claim({ template, require_promoted: true, claim_ref: "elsewhere/raw" });
    try {
      const envs = await envdGet(node.addr, clone.id, "/envs");
      expect({ template, status: envs.status }).toEqual({ template, status: 401 });
      expect(envs.body).not.toContain("hunter2");
      const file = await envdGet(node.addr, clone.id, "/files?path=/home/user/secret.txt&username=user");
      expect(file.status).toBe(401);
      expect(file.body).not.toContain("team-a-source");
    } finally {
      await client.release(clone.id);
    }
  }

  // The owner's own create hands the clone its token: the build's files and env are there, with the create's envs.
  const sbx = await Sandbox.create("payroll", { ...sdkOpts(s), envs: { EXTRA: "1" } });
  try {
    const out = await sbx.commands.run("cat /home/user/secret.txt; echo $PASSWORD $EXTRA");
    expect(out.stdout).toBe("team-a-source\nhunter2 1\n");
  } finally {
    await sbx.kill();
  }
}, 120_000);
