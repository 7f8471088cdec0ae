// Every flag and environment variable the chart passes is one the binary accepts: the args and env rendered into
// each Deployment go through that binary's own flag parser and startup checks (services/<bin>/flags.ts), in every
// configuration, and then through the real entry point, which must not answer with a usage error (exit 2).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkApiserverConfig, parseApiserverFlags, type ApiserverConfig } from "#services/sandbox-apiserver/flags.ts";
import {
  checkEnvdProxyConfig,
  parseEnvdProxyFlags,
  type EnvdProxyConfig,
} from "#services/sandbox-envd-proxy/flags.ts";
import { E2B, at, container, containerEnv, merge, render, root, type Container, type Values } from "./helm.ts";
import { DEFAULT_RELAY_LIMITS } from "#shared/relay/index.ts";

const CONFIGURATIONS: [string, Values][] = [
  ["default", {}],
  ["sandboxd token", at("apiserver.sandboxdToken.secretName", "t")],
  ["no warm-pool driver", at("apiserver.warmPoolDriver", false)],
  ["cert-manager off", at("certManager", { enabled: false, caBundle: "Zm9v" })],
  ["other ports and debug logs", merge(at("apiserver", { securePort: 7443, logLevel: "debug" }))],
  ["e2b", E2B],
  [
    "e2b with every optional flag",
    merge(
      E2B,
      at("apiserver.e2b", {
        namespace: "tenants",
        port: 9090,
        envdVersion: "0.8.1",
        defaultTimeoutSeconds: 900,
        defaultQuota: { maxSandboxes: 5, createsPerSecond: 0.5, maxSnapshots: 0, snapshotsPerSecond: 3 },
        templateAliases: "base python:3.12 small\n",
        builds: { enabled: true, parallel: 4 },
        envdSecret: { value: "s", secretName: "" },
      }),
    ),
  ],
  ["e2b, proxy with TLS and its own domain and namespace", merge(E2B, at("envdProxy", { tlsSecretName: "w", domain: "relay.example.com", namespace: "team-a", port: 443 }))],
];

function parseApiserver(c: Container): ApiserverConfig {
  const outcome = parseApiserverFlags(c.args ?? [], containerEnv(c));
  if (outcome.kind !== "run") throw new Error(`sandbox-apiserver parsed ${outcome.kind}, not run`);
  checkApiserverConfig(outcome.config);
  return outcome.config;
}

function parseProxy(c: Container): EnvdProxyConfig {
  const outcome = parseEnvdProxyFlags(c.args ?? [], containerEnv(c));
  if (outcome.kind !== "run") throw new Error(`sandbox-envd-proxy parsed ${outcome.kind}, not run`);
  checkEnvdProxyConfig(outcome.config);
  return outcome.config;
}

describe("rendered args through the binaries' flag parsers", () => {
  for (const [name, values] of CONFIGURATIONS) {
    test(`${name}: sandbox-apiserver parses and passes its startup checks`, async () => {
      const objects = await render(values);
      const c = container(objects, "sandbox-apiserver");
      const config = parseApiserver(c);
      const v = merge({ apiserver: { securePort: 6443, warmPoolDriver: true } }, values).apiserver as Values;
      expect(config.serving.securePort).toBe(v.securePort as number);
      expect(config.serving.tlsCertFile).toBe("/etc/sandbox-apiserver/serving-certs/tls.crt");
      expect(config.enableWarmPoolDriver).toBe(v.warmPoolDriver as boolean);
      const e2b = (v.e2b ?? {}) as Values;
      expect(config.enableE2bApi).toBe(e2b.enabled === true);
      if (e2b.enabled) {
        expect(config.e2b.domain).toBe(e2b.domain as string);
        expect(config.e2b.namespace).toBe((e2b.namespace as string | undefined) ?? "default");
        expect(config.e2b.apiKeyFile).toBe("/etc/sandbox-apiserver/e2b-api-keys/keys");
        expect(config.e2b.envdSecretFile).toBe("/etc/sandbox-apiserver/e2b-envd-secret/secret");
        expect(config.e2b.builds.enabled).toBe(((e2b.builds as Values | undefined)?.enabled as boolean | undefined) ?? false);
        // values.yaml's multi-tenant defaults unless the case overrides them; 0 = the flag left out (no limit).
        const quota = { maxSandboxes: 20, createsPerSecond: 2, maxSnapshots: 10, snapshotsPerSecond: 0.2, ...((e2b.defaultQuota ?? {}) as Values) };
        expect(config.e2b.defaultQuota).toEqual(quota);
      }
      // Every mounted file a flag names lies under a volume mount of this container.
      for (const arg of c.args ?? []) {
        const file = /^--[a-z0-9-]+-file=(\/.+)$/.exec(arg)?.[1];
        if (file) expect(c.volumeMounts!.some((m) => file.startsWith(`${m.mountPath}/`))).toBe(true);
      }
    });
  }

  for (const [name, values] of CONFIGURATIONS.filter(([, v]) => (v.apiserver as Values | undefined)?.e2b)) {
    test(`${name}: sandbox-envd-proxy parses and passes its startup checks`, async () => {
      const objects = await render(values);
      const c = container(objects, "sandbox-envd-proxy");
      const config = parseProxy(c);
      const proxy = ((values.envdProxy ?? {}) as Values);
      expect(config.domain).toBe((proxy.domain as string | undefined) ?? "sandbox.example.com");
      expect(config.namespace).toBe((proxy.namespace as string | undefined) ?? "");
      expect(config.bindAddress).toBe(`:${(proxy.port as number | undefined) ?? 8443}`);
      expect(config.sandboxdTokenFile).toBe("/etc/sandbox-envd-proxy/sandboxd-token/token");
      expect(config.tlsCertFile !== undefined).toBe(proxy.tlsSecretName !== undefined);
      // The relay's bounds are always passed; the chart's defaults are the binary's, but for the per-client public
      // cap: the chart's proxy sits behind an edge whose one address every public client shares, so it is off
      // there (envdProxy.relay.maxPublicRelaysPerClient, docs/envd-relay.md "Bounds").
      expect(config.limits).toEqual({ ...DEFAULT_RELAY_LIMITS, maxPublicRelaysPerClient: 0 });
      for (const arg of c.args ?? []) {
        const file = /^--[a-z0-9-]+-file=(\/.+)$/.exec(arg)?.[1];
        if (file) expect(c.volumeMounts!.some((m) => file.startsWith(`${m.mountPath}/`))).toBe(true);
      }
    });
  }

  test("a flag the binary does not know would be caught: the parser refuses it (exit 2 class)", () => {
    expect(() => parseApiserverFlags(["--e2b-domian=x"], {})).toThrow(/e2b-domian/);
    expect(() => parseEnvdProxyFlags(["--bind-address=nope"], {})).toThrow(/bind-address/);
  });
});

/** Runs an entry point with the container's args and env; a process still up after the window accepted its flags. */
async function runEntryPoint(bin: string, c: Container): Promise<{ code: number | "running"; stderr: string }> {
  const cwd = mkdtempSync(join(tmpdir(), "chart-entry-"));
  try {
    const env: Record<string, string> = { PATH: process.env.PATH ?? "", HOME: cwd, ...containerEnv(c) };
    const proc = Bun.spawn(["bun", "run", join(root, "services", bin, "main.ts"), ...(c.args ?? [])], {
      cwd,
      env,
      stdout: "ignore",
      stderr: "pipe",
    });
    const timer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
    const code = await proc.exited;
    clearTimeout(timer);
    const stderr = await new Response(proc.stderr).text();
    return { code: proc.signalCode === "SIGKILL" ? "running" : code, stderr };
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}

describe("rendered args through the real entry points", () => {
  const full = CONFIGURATIONS.find(([n]) => n === "e2b with every optional flag")![1];
  const tls = CONFIGURATIONS.find(([n]) => n.startsWith("e2b, proxy with TLS"))![1];

  test("sandbox-apiserver: no usage error for the default and the fullest e2b args", async () => {
    for (const values of [{}, full]) {
      const c = container(await render(values), "sandbox-apiserver");
      const r = await runEntryPoint("sandbox-apiserver", c);
      expect(`${r.code} ${r.stderr}`).not.toMatch(/^2 /);
      expect(r.stderr).not.toContain("--help' for the flag table");
    }
  }, 60_000);

  test("sandbox-envd-proxy: no usage error for h2c and TLS args", async () => {
    for (const values of [E2B, tls]) {
      const c = container(await render(values), "sandbox-envd-proxy");
      const r = await runEntryPoint("sandbox-envd-proxy", c);
      expect(`${r.code} ${r.stderr}`).not.toMatch(/^2 /);
      expect(r.stderr).not.toContain("--help' for the flag table");
    }
  }, 60_000);
});
