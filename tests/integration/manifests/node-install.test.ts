// manifests/ holds everything a node install needs (README "Installing a node"): the RBAC, the CRDs, the systemd
// unit and its environment file. The unit passes systemd's own verifier; the environment file example, filled in
// as the README says, is accepted by vk-sandbox's flag parser, and names only variables the daemon reads; the
// unit's Environment= lines are flags the daemon has. (The RBAC's sufficiency is proven by the vk-sandbox
// integration and e2e suites, which run each daemon as its own node's ServiceAccount; the node admission policy's
// effect by tests/e2e/vk-sandbox/node-identity.test.ts, its strict dry run by rbac.test.ts here.)
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { VK_LOG_LEVEL_ENV, parseVkSandboxFlags, vkSandboxFlags } from "#services/vk-sandbox/flags.ts";

const root = join(import.meta.dir, "..", "..", "..");
const manifests = join(root, "manifests");
const unitPath = join(manifests, "systemd", "vk-sandbox.service");
const envPath = join(manifests, "systemd", "env.example");
const dropInDir = join(manifests, "systemd", "vk-sandbox.service.d");
const dropIns = () => readdirSync(dropInDir).sort();

/** Every variable vk-sandbox reads: its flags' fallbacks, the log level and KUBECONFIG. */
const DAEMON_ENV = new Set([
  ...Object.values(vkSandboxFlags).flatMap((f) => (f.env ? [f.env] : [])),
  VK_LOG_LEVEL_ENV,
  "KUBECONFIG",
]);

/** `KEY=value` lines; with `commented`, also the `#KEY=value` lines an operator uncomments. */
function envLines(text: string, commented: boolean): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = (commented ? /^#?([A-Z][A-Z0-9_]*)=(.*)$/ : /^([A-Z][A-Z0-9_]*)=(.*)$/).exec(line.trim());
    if (m) out.set(m[1]!, m[2]!);
  }
  return out;
}

/** The placeholders the README tells an operator to fill in. */
const fill = (v: string) => v.replace("<hostname>", "gpu-07").replace("<host-internal-ip>", "10.0.3.7");

describe("manifests/ is complete", () => {
  test("RBAC, the CRDs, the unit and the environment example are all there", () => {
    expect(existsSync(join(manifests, "rbac.yaml"))).toBe(true);
    expect(existsSync(join(manifests, "node-admission.yaml"))).toBe(true);
    expect(readdirSync(join(manifests, "crds")).sort()).toEqual([
      "nodeinventories.sandbox.cocoonstack.io.yaml",
      "nodeinventoryshards.sandbox.cocoonstack.io.yaml",
      "sandboxtemplates.extensions.agents.x-k8s.io.yaml",
      "sandboxwarmpools.extensions.agents.x-k8s.io.yaml",
    ]);
    expect(existsSync(unitPath)).toBe(true);
    expect(existsSync(envPath)).toBe(true);
    expect(dropIns()).toEqual(["10-own-identity.conf", "20-publish-inventory.conf"]);
    const kinds = parseAllDocuments(readFileSync(join(manifests, "rbac.yaml"), "utf8")).map((d) => {
      const o = d.toJS() as { kind: string; metadata: { name: string } };
      return `${o.kind} ${o.metadata.name}`;
    });
    // No shared ServiceAccount: each node gets its own in sandbox-nodes at install (issue 22 cases 2 and 4).
    expect(kinds).toEqual([
      "Namespace sandbox-system",
      "Namespace sandbox-nodes",
      "ClusterRole vk-sandbox-node",
      "ClusterRoleBinding vk-sandbox-node",
      "Role vk-sandbox-node-lease",
      "RoleBinding vk-sandbox-node-lease",
    ]);
  });
});

describe("systemd unit", () => {
  test("systemd-analyze verify finds nothing to say about it, with and without the drop-ins", () => {
    const which = Bun.spawnSync(["sh", "-c", "command -v systemd-analyze"]);
    // Without systemd's verifier there is nothing to run it with; every Linux node this installs on has one.
    if (which.exitCode !== 0) {
      console.warn("systemd-analyze not on PATH: unit not verified");
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), "unit-verify-"));
    try {
      // The verifier checks that ExecStart is executable, so point it at a stand-in for the installed binary.
      const stub = join(dir, "vk-sandbox");
      writeFileSync(stub, "#!/bin/sh\n");
      chmodSync(stub, 0o755);
      const toStub = (text: string) => text.replaceAll("/usr/local/bin/vk-sandbox", stub);
      const unit = readFileSync(unitPath, "utf8");
      expect(unit).toContain("ExecStart=/usr/local/bin/vk-sandbox\n");
      const copy = join(dir, "vk-sandbox.service");
      writeFileSync(copy, toStub(unit));
      const verify = () => Bun.spawnSync(["systemd-analyze", "verify", "--man=no", copy], { cwd: dir });
      const bare = verify();
      expect(bare.stderr.toString()).toBe("");
      expect(bare.exitCode).toBe(0);
      // systemd reads drop-ins from <unit>.d next to a unit given by path, as it does under /etc/systemd/system.
      mkdirSync(`${copy}.d`);
      for (const f of dropIns()) writeFileSync(join(`${copy}.d`, f), toStub(readFileSync(join(dropInDir, f), "utf8")));
      const withDropIns = verify();
      expect(withDropIns.stderr.toString()).toBe("");
      expect(withDropIns.exitCode).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("its Environment= lines set variables the daemon reads, and EnvironmentFile is the example's path", () => {
    const unit = readFileSync(unitPath, "utf8");
    const all = [unit, ...dropIns().map((f) => readFileSync(join(dropInDir, f), "utf8"))].join("\n");
    const set = [...all.matchAll(/^Environment=([A-Z_]+)=/gm)].map((m) => m[1]!);
    expect(set.length).toBeGreaterThan(0);
    for (const name of set) expect(DAEMON_ENV.has(name) ? name : `${name} (not read by vk-sandbox)`).toBe(name);
    expect(unit).toMatch(/^EnvironmentFile=\/etc\/vk-sandbox\/env$/m);
    expect(unit).toMatch(/^ConditionPathExists=\/etc\/vk-sandbox\/env$/m);
  });

  test("the publish-inventory drop-in's command line is one vk-sandbox accepts, with publishing on", () => {
    const text = readFileSync(join(dropInDir, "20-publish-inventory.conf"), "utf8");
    const starts = [...text.matchAll(/^ExecStart=(.*)$/gm)].map((m) => m[1]!);
    expect(starts[0]).toBe(""); // clears the unit's own ExecStart first
    const [binary, ...args] = starts[1]!.split(/\s+/);
    expect(binary).toBe("/usr/local/bin/vk-sandbox");
    const outcome = parseVkSandboxFlags(args, {});
    expect(outcome.kind).toBe("run");
    if (outcome.kind === "run") expect(outcome.config.publishInventory).toBe(true);
  });
});

describe("environment file example", () => {
  test("every variable in it, set or commented, is one vk-sandbox reads", () => {
    const vars = envLines(readFileSync(envPath, "utf8"), true);
    expect(vars.size).toBeGreaterThanOrEqual(7);
    for (const name of vars.keys()) expect(DAEMON_ENV.has(name) ? name : `${name} (not read by vk-sandbox)`).toBe(name);
  });

  test("filled in, with every commented line uncommented too, the daemon's flag parser accepts it", () => {
    const text = readFileSync(envPath, "utf8");
    for (const commented of [false, true]) {
      const env = Object.fromEntries([...envLines(text, commented)].map(([k, v]) => [k, fill(v)]));
      const outcome = parseVkSandboxFlags([], env);
      expect(outcome.kind).toBe("run");
      if (outcome.kind !== "run") continue;
      const c = outcome.config;
      expect(c.nodeName).toBe("gpu-07-sandboxd");
      expect(c.nodeIp).toBe("10.0.3.7");
      expect(c.listenPort).toBe(10260);
      expect(c.sandboxdUrl).toBe("http://127.0.0.1:7777");
      expect(c.sandboxdTokenFile).toBe("/etc/vk-sandbox/sandboxd-token");
      expect(c.statePath).toBe("/var/lib/vk-sandbox/claims.json");
      if (commented) expect(c.sandboxdAdvertiseAddr).toBe("10.0.3.7:7777");
    }
  });
});
