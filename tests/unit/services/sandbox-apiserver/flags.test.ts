// sandbox-apiserver's flags: seed 003's own flags, the generic aggregated-apiserver options, the e2b set,
// the project decisions (positive --inventory-stale-after, semver --e2b-envd-version), and exit codes.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import {
  apiserverFlags,
  apiserverHelp,
  checkApiserverConfig,
  parseApiserverFlags,
} from "#services/sandbox-apiserver/flags.ts";
import { flagReaders } from "../flags-fixture.ts";

const root = join(import.meta.dir, "..", "..", "..", "..");

const { config, usageMessage, startupMessage } = flagReaders(parseApiserverFlags, checkApiserverConfig);

describe("defaults", () => {
  test("own flags follow seed 003", () => {
    const c = config();
    expect(c).toMatchObject({
      sandboxdToken: "",
      sandboxdTokenFile: undefined,
      enableWarmPoolDriver: true,
      warmPoolSyncInterval: 5_000, // "0 (means 5s)"
      inventoryStaleAfter: 90_000,
      inventoryTrustedNetworks: [],
      enableE2bApi: false,
    });
    expect(c.e2b).toMatchObject({
      bindAddress: ":8080",
      namespace: "default",
      domain: "",
      envdVersion: "0.8.0",
      defaultTimeoutSeconds: 300,
      allowAnonymous: false,
      builds: { enabled: false, parallel: 2, timeoutMs: 30 * 60_000, logLines: 10_000, uploadMax: 1073741824 },
    });
  });

  test("generic options carry the upstream names and defaults", () => {
    const c = config();
    expect(c.serving).toEqual({
      securePort: 6443,
      bindAddress: "0.0.0.0",
      tlsCertFile: undefined,
      tlsPrivateKeyFile: undefined,
      certDir: "apiserver.local.config/certificates",
      tlsMinVersion: undefined,
      tlsCipherSuites: [],
    });
    expect(c.authentication).toMatchObject({
      skipLookup: false,
      tolerateLookupFailure: false,
      tokenWebhookCacheTtl: 10_000,
      requestheaderUsernameHeaders: ["x-remote-user"],
      requestheaderGroupHeaders: ["x-remote-group"],
      requestheaderExtraHeadersPrefix: ["x-remote-extra-"],
    });
    expect(c.authorization).toMatchObject({
      alwaysAllowPaths: ["/healthz", "/readyz", "/livez"],
      webhookCacheAuthorizedTtl: 10_000,
      webhookCacheUnauthorizedTtl: 10_000,
    });
    expect(c.profiling).toBe(true);
  });

  test("there is no etcd option", () => {
    expect(Object.values(apiserverFlags).some((spec) => spec.flag.includes("etcd"))).toBe(false);
    expect(usageMessage(["--etcd-servers=http://127.0.0.1:2379"])).toContain("unknown flag: --etcd-servers");
  });
});

describe("values", () => {
  test("a zero or negative warm-pool interval means 5s; a positive one is kept", () => {
    expect(config(["--warm-pool-sync-interval=-1s"]).warmPoolSyncInterval).toBe(5_000);
    expect(config(["--warm-pool-sync-interval=2s"]).warmPoolSyncInterval).toBe(2_000);
  });

  test("the e2b envd version is any semantic version; empty means 0.8.0", () => {
    expect(config(["--e2b-envd-version=0.9.0-beta.1+build.7"]).e2b.envdVersion).toBe("0.9.0-beta.1+build.7");
    expect(config(["--e2b-envd-version="]).e2b.envdVersion).toBe("0.8.0");
  });

  const usage: [string[], string][] = [
    [["--inventory-stale-after=0"], "--inventory-stale-after"],
    [["--inventory-stale-after=-90s"], "--inventory-stale-after"],
    [["--inventory-stale-after=90"], "--inventory-stale-after"],
    [["--e2b-envd-version=latest"], "--e2b-envd-version"],
    [["--e2b-envd-version=v0.8.0"], "--e2b-envd-version"],
    [["--e2b-envd-version=0.8"], "--e2b-envd-version"],
    [["--e2b-default-timeout=-1"], "--e2b-default-timeout"],
    [["--e2b-build-timeout=30"], "--e2b-build-timeout"],
    [["--e2b-bind-address=8080"], "--e2b-bind-address"],
    [["--secure-port=70000"], "--secure-port"],
    [["--tls-min-version=TLS1.2"], "--tls-min-version"],
    [["--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,ECDHE-RSA-AES128-GCM-SHA256"], "--tls-cipher-suites"],
    [["--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA"], "--tls-cipher-suites"],
    [["--enable-warm-pool-driver=maybe"], "--enable-warm-pool-driver"],
  ];
  for (const [argv, flag] of usage) {
    test(`${argv.join(" ")} is a usage error naming ${flag}`, () => {
      expect(usageMessage(argv)).toContain(flag);
    });
  }
});

describe("startup checks (exit 1)", () => {
  test("half a TLS pair is refused", () => {
    expect(startupMessage(["--tls-cert-file=/c"])).toContain("--tls-private-key-file");
  });

  test("the e2b surface is only checked when enabled", () => {
    expect(() => checkApiserverConfig(config())).not.toThrow();
    expect(startupMessage(["--enable-e2b-api", "--e2b-envd-secret-file=/s", "--e2b-domain=d"])).toContain("no API key configured");
    expect(startupMessage(["--enable-e2b-api", "--e2b-allow-anonymous", "--e2b-envd-secret-file=/s"])).toContain("no domain configured");
    expect(() =>
      checkApiserverConfig(config(["--enable-e2b-api", "--e2b-allow-anonymous", "--e2b-envd-secret-file=/s", "--e2b-domain=d"])),
    ).not.toThrow();
  });
});

describe("public user ports (the e2b surface's stamp, issue 20 part 3)", () => {
  test("e2b cloud's policy by default; --public-traffic-default=false and --forbid-public-traffic change it; --help names both", () => {
    expect(config().publicTraffic).toEqual({ defaultPublic: true, forbid: false });
    expect(config(["--public-traffic-default=false"]).publicTraffic).toEqual({ defaultPublic: false, forbid: false });
    expect(config(["--forbid-public-traffic"]).publicTraffic).toEqual({ defaultPublic: true, forbid: true });
    const text = apiserverHelp();
    expect(text).toContain("--public-traffic-default");
    expect(text).toContain("--forbid-public-traffic");
  });
});

describe("help", () => {
  test("lists every flag and OPERATOR_LOG_LEVEL", () => {
    const text = apiserverHelp();
    for (const spec of Object.values(apiserverFlags)) expect(text).toContain(`--${spec.flag}`);
    expect(text).toContain("OPERATOR_LOG_LEVEL");
  });
});

describe("a real process", () => {
  const main = join(root, "services", "sandbox-apiserver", "main.ts");
  const run = (args: string[], env: Record<string, string> = {}) =>
    Bun.spawnSync(["bun", main, ...args], { cwd: root, env: { ...process.env, OPERATOR_LOG_LEVEL: "", ...env } });

  test("a bad flag exits 2 naming it", () => {
    const proc = run(["--bad"]);
    expect(proc.exitCode).toBe(2);
    expect(proc.stderr.toString()).toContain("unknown flag: --bad");
  });

  test("a zero freshness window exits 2 naming the flag and the value", () => {
    const proc = run(["--inventory-stale-after=0"]);
    expect(proc.exitCode).toBe(2);
    expect(proc.stderr.toString()).toContain('invalid value "0" for flag --inventory-stale-after');
  });

  test("an unknown or insecure cipher suite exits 2 naming the flag, the value and why", () => {
    const unknown = run(["--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,ECDHE-RSA-AES128-GCM-SHA256"]);
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr.toString()).toContain("for flag --tls-cipher-suites: unknown cipher suite \"ECDHE-RSA-AES128-GCM-SHA256\"");
    const insecure = run(["--tls-cipher-suites=TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA"]);
    expect(insecure.exitCode).toBe(2);
    expect(insecure.stderr.toString()).toContain('invalid value "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA" for flag --tls-cipher-suites');
    expect(insecure.stderr.toString()).toContain("insecure cipher suite");
  });

  test("an unknown OPERATOR_LOG_LEVEL exits 1 with one line", () => {
    const proc = run([], { OPERATOR_LOG_LEVEL: "verbose" });
    expect(proc.exitCode).toBe(1);
    const lines = proc.stderr.toString().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("OPERATOR_LOG_LEVEL");
  });

  test("the e2b surface without a key exits 1 naming what is missing", () => {
    const proc = run(["--enable-e2b-api", "--e2b-domain=d", "--e2b-envd-secret-file=/s"]);
    expect(proc.exitCode).toBe(1);
    expect(proc.stderr.toString()).toContain("no API key configured");
  });

  test("valid flags with no Kubernetes connection exit 1 naming the kube config (spec §1.1 step 4)", () => {
    const proc = run([], { KUBECONFIG: "/nonexistent/kubeconfig" });
    expect(proc.exitCode).toBe(1);
    expect(proc.stderr.toString()).toContain("load kube config:");
  });
});
