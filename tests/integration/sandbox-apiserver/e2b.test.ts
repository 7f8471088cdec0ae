// Scenario 46: the e2b surface mounted in sandbox-apiserver (--enable-e2b-api). Misconfigured it exits 1; fully
// configured, the real e2b SDK creates a sandbox on a simulated node through it, and once the node's inventory is
// published the sandbox is listed by kubectl get sandboxes through the aggregator.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { kubectl } from "../../kube/kubectl.ts";
import { freePorts } from "../../kube/ports.ts";
import { startTestGuest, type TestGuest } from "../e2b/guest.ts";
import { type Stack, startStack } from "./fixture.ts";
import { e2bServerArgs, publishSimNode, writeE2bFiles } from "#tests/support/e2b-apiserver.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "root-e2b";
const KEY = "e2b_cccccccccccccccccccccccccccccccccccccccc";
let stack: Stack;
let sim: SandboxdSim;
let guest: TestGuest;

beforeAll(async () => {
  stack = await startStack();
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img:1/none/small=3"] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  writeE2bFiles(stack.dir, `${KEY} team-e\n`);
}, 60_000);

afterAll(async () => {
  await sim?.stop();
  await guest?.stop();
  await stack?.stop();
});

const publishNode = () =>
  publishSimNode(
    stack,
    sim,
    sim.claims().map((c) => ({ name: c.claimRef || c.id, id: c.id, phase: "Running", template: c.key.template, ...(c.claimRef ? { claimRef: c.claimRef } : {}) })),
  );

describe("46: the e2b surface in sandbox-apiserver", () => {
  test("without a key file and without --e2b-allow-anonymous, or without --e2b-domain, startup exits 1", async () => {
    const noKey = await stack.startServer({ waitReady: false, args: ["--enable-e2b-api", "--e2b-domain=sb.test", `--e2b-envd-secret-file=${join(stack.dir, "secret")}`] });
    expect(await noKey.proc.exited).toBe(1);
    expect(noKey.stderr()).toContain("no API key configured");
    const noDomain = await stack.startServer({ waitReady: false, args: ["--enable-e2b-api", `--e2b-api-key-file=${join(stack.dir, "keys")}`, `--e2b-envd-secret-file=${join(stack.dir, "secret")}`] });
    expect(await noDomain.proc.exited).toBe(1);
    expect(noDomain.stderr()).toContain("--e2b-domain");
  });

  test("fully configured, an e2b SDK create appears in kubectl get sandboxes after the node publishes", async () => {
    await publishNode();
    const [e2bPort] = freePorts(1);
    const server = await stack.startServer({ args: e2bServerArgs({ rootToken: ROOT, port: e2bPort, dir: stack.dir }) });
    try {
      await stack.register(server.port);
      const sbx = await Sandbox.create("base", { apiKey: KEY, apiUrl: `http://127.0.0.1:${e2bPort}`, domain: "sb.test", requestTimeoutMs: 10_000 });
      expect(sim.claims().length).toBe(1);
      const claim = sim.claims()[0]!;
      expect(claim.claimRef?.startsWith("team-e/")).toBe(true);
      await publishNode();
      const row = await waitFor("the e2b sandbox in kubectl get sandboxes", async () => {
        const r = await kubectl(["get", "sandboxes", "-n", "team-e", "-o", "json"], { kubeconfig: stack.admin });
        const items = (JSON.parse(r.stdout) as { items: { metadata: { annotations?: Record<string, string> } }[] }).items;
        return items.find((i) => i.metadata.annotations?.["sandbox.cocoonstack.io/claim-id"] === claim.id);
      }, 10_000);
      expect(row).toBeDefined();
      await sbx.kill().catch(() => undefined);
    } finally {
      await server.stop();
    }
  }, 60_000);
});
