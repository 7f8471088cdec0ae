// The build flags are shared (shared/config/common-flags.ts): sandbox-apiserver with --enable-e2b-api and
// --e2b-builds serves the build API too, a COPY through its directory store's signed PUT included, and promotes
// the result on the node (docs/e2b.md "Builds").
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { freePorts } from "../../kube/ports.ts";
import { type Stack, startStack } from "../sandbox-apiserver/fixture.ts";
import { tarOf } from "./support.ts";
import { e2bServerArgs, publishSimNode, writeE2bFiles } from "#tests/support/e2b-apiserver.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "root-e2b-builds-apiserver";
const KEY = "e2b_3333333333333333333333333333333333333333";
let stack: Stack;
let sim: SandboxdSim;
let uploads: string;

beforeAll(async () => {
  stack = await startStack();
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img:1/none/small=2"], guestAgents: true });
  uploads = mkdtempSync(join(tmpdir(), "e2b-apiserver-uploads-"));
  writeE2bFiles(stack.dir, `${KEY} team\n`);
}, 60_000);

afterAll(async () => {
  await sim?.stop();
  await stack?.stop();
  rmSync(uploads, { recursive: true, force: true });
});

test("sandbox-apiserver --e2b-builds: request, upload, start, poll to ready; the node holds e2b/team/app; no build claim left", async () => {
  await waitFor("warm VMs", () => sim.info().pools.every((p) => p.warm > 0), 20_000);
  await publishSimNode(stack, sim);
  const [e2bPort] = freePorts(1);
  const server = await stack.startServer({ args: e2bServerArgs({ rootToken: ROOT, port: e2bPort, dir: stack.dir }, "--e2b-builds", `--e2b-build-dir=${join(uploads, "store")}`) });
  const api = `http://127.0.0.1:${e2bPort}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${api}${path}`, { method, headers: { "x-api-key": KEY, "content-type": "application/json" }, ...(body ? { body: JSON.stringify(body) } : {}) });
    const text = await r.text();
    return { status: r.status, json: text ? JSON.parse(text) : undefined };
  };
  try {
    const b = await call("POST", "/v3/templates", { name: "app" });
    expect(b.status).toBe(202);
    const hash = "e".repeat(64);
    const link = await call("GET", `/templates/app/files/${hash}`);
    expect(link.status).toBe(201);
    const archive = tarOf({ "conf/app.ini": "x=1\n" });
    expect((await fetch(link.json.url, { method: "PUT", body: archive as Uint8Array<ArrayBuffer> })).status).toBe(200);
    const start = await call("POST", `/v2/templates/app/builds/${b.json.buildID}`, {
      fromImage: "base",
      steps: [
        { type: "COPY", args: ["conf/", "/home/user/conf/"], filesHash: hash },
        { type: "RUN", args: ["grep -q x=1 /home/user/conf/app.ini && echo copied"] },
      ],
    });
    expect(start.status).toBe(202);
    const st = await waitFor(
      "the build to finish",
      async () => {
        const r = await call("GET", `/templates/app/builds/${b.json.buildID}/status`);
        return r.json.status === "ready" || r.json.status === "error" ? r.json : undefined;
      },
      60_000,
    );
    expect(st.status).toBe("ready");
    expect(st.logEntries.some((l: { message: string; step: string }) => l.message === "copied" && l.step === "2")).toBe(true);
    expect((sim.info().templates ?? []).map((t) => t.key.template)).toContain("e2b/team/app");
    expect(sim.claims().filter((c) => (c.claimRef ?? "").includes("/e2b-build-"))).toEqual([]);
  } finally {
    await server.stop();
  }
}, 120_000);
