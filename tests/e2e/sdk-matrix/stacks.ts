// Both stacks for a JS-driven matrix suite, each in its own describe block: the sandbox-e2b mesh (in process, a
// guest agent per sandbox, the in-process envd proxy) and the full stack as `bash scripts/stack.sh` runs it (a real
// kube-apiserver, sandbox-apiserver, sandbox-envd-proxy). Both know the `code-interpreter-v1` alias.
import { afterAll, beforeAll, describe } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DOMAIN, KEY_A, startStack as startMesh, type Stack } from "#tests/integration/e2b/harness.ts";
import { startStack as startScriptStack, type RunningStack } from "#tests/e2e/stack/run-stack.ts";
import { E2B_DOMAIN as SCRIPT_DOMAIN } from "#scripts/stack/mesh.ts";
import { kubectlBinary } from "#tests/kube/peers.ts";
import { waitFor } from "#tests/support/wait.ts";

export const MESH = "sandbox-e2b mesh (tests/integration/e2b/harness.ts, a guest agent per sandbox)";
export const FULL = "full stack (bash scripts/stack.sh: kube-apiserver, sandbox-apiserver, sandbox-envd-proxy)";
export const STACKS = [MESH, FULL];

export interface Target {
  stack: string;
  apiKey: string;
  apiUrl: string;
  sandboxUrl: string;
  domain: string;
}

/** The SDK's connection options for a target (E2B_SANDBOX_URL mode: every envd call names the sandbox by header). */
export const sdkOpts = (t: Target) => ({ apiKey: t.apiKey, apiUrl: t.apiUrl, sandboxUrl: t.sandboxUrl, domain: t.domain, requestTimeoutMs: 30_000 });

/**
 * `builds`: the mesh serves the template build API too (`--e2b-builds` with a directory store in a temp dir), as the
 * full stack always does; a suite that builds templates asks for it.
 */
export function onBothStacks(body: (target: () => Target) => void, o: { builds?: boolean } = {}): void {
  describe(MESH, () => {
    let s: Stack;
    let t: Target;
    let buildDir: string | undefined;
    beforeAll(async () => {
      buildDir = o.builds ? mkdtempSync(join(tmpdir(), "sdk-matrix-builds-")) : undefined;
      const extraFlags = buildDir ? ["--e2b-builds", `--e2b-build-dir=${join(buildDir, "store")}`] : [];
      s = await startMesh({ proxy: true, guestAgents: true, aliases: "base img:1\ncode-interpreter-v1 img:1\n", extraFlags });
      t = { stack: MESH, apiKey: KEY_A, apiUrl: s.apiUrl, sandboxUrl: s.proxyUrl!, domain: DOMAIN };
    }, 60_000);
    afterAll(async () => {
      await s?.stop();
      if (buildDir) rmSync(buildDir, { recursive: true, force: true });
    });
    body(() => t);
  });
  describe(FULL, () => {
    let stack: RunningStack;
    let t: Target;
    beforeAll(async () => {
      await kubectlBinary();
      stack = await startScriptStack([], 600_000);
      console.log(`full stack ready in ${stack.readySeconds.toFixed(1)} s`);
      t = { stack: FULL, apiKey: stack.env.E2B_API_KEY!, apiUrl: stack.env.E2B_API_URL!, sandboxUrl: stack.env.E2B_SANDBOX_URL!, domain: SCRIPT_DOMAIN };
      // The stack is up before its warm pool has filled (the example pool is applied last): a create answers 503
      // until then, which the SDKs surface as "retry". Wait until one succeeds, then give it back.
      const started = performance.now();
      const id = await waitFor("a warm sandbox on the full stack", async () => {
        const r = await fetch(`${t.apiUrl}/sandboxes`, { method: "POST", headers: { "x-api-key": t.apiKey, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base" }) });
        return r.status === 201 ? ((await r.json()) as { sandboxID: string }).sandboxID : undefined;
      }, 120_000, 250);
      await fetch(`${t.apiUrl}/sandboxes/${id}`, { method: "DELETE", headers: { "x-api-key": t.apiKey } });
      console.log(`full stack: first warm sandbox after ${((performance.now() - started) / 1000).toFixed(1)} s more`);
    }, 800_000);
    afterAll(async () => {
      await stack?.discard("sdk-matrix");
    });
    body(() => t);
  });
}
