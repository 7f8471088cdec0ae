// sandbox-envd-proxy's flags: seed 003's table, the project decisions, envd-proxy.md §2's startup
// failures (scenarios 1 and 2), and exit codes of a real process.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { UsageError } from "#shared/config/index.ts";
import { DEFAULT_RELAY_LIMITS } from "#shared/relay/index.ts";
import {
  checkEnvdProxyConfig,
  envdProxyFlags,
  envdProxyHelp,
  parseEnvdProxyFlags,
} from "#services/sandbox-envd-proxy/flags.ts";
import { flagReaders } from "../flags-fixture.ts";

const root = join(import.meta.dir, "..", "..", "..", "..");
const complete = ["--domain=sb.example.com", "--e2b-envd-secret-file=/secret", "--sandboxd-token-file=/token"];

const { config, startupMessage } = flagReaders(parseEnvdProxyFlags, checkEnvdProxyConfig);

describe("envd-proxy flags", () => {
  test("defaults follow seed 003", () => {
    expect(config()).toEqual({
      bindAddress: ":8443",
      domain: "",
      namespace: "default",
      tlsCertFile: undefined,
      tlsPrivateKeyFile: undefined,
      guestHttp2: false,
      e2bEnvdSecretFile: undefined,
      sandboxdToken: "",
      sandboxdTokenFile: undefined,
      inventoryStaleAfter: 90_000,
      metricsBindAddress: undefined,
      limits: DEFAULT_RELAY_LIMITS,
      inventoryTrustedNetworks: [],
      e2bApiUpstream: undefined,
      publicTraffic: { defaultPublic: true, forbid: false },
    });
  });

  test("public ports: e2b cloud's default; --public-traffic-default=false and --forbid-public-traffic keep ports private", () => {
    expect(config(["--public-traffic-default=false"]).publicTraffic).toEqual({ defaultPublic: false, forbid: false });
    expect(config(["--forbid-public-traffic"]).publicTraffic).toEqual({ defaultPublic: true, forbid: true });
    expect(envdProxyHelp()).toContain("--forbid-public-traffic");
  });

  test("--e2b-api-upstream takes a base URL (trailing slash dropped) and refuses a path", () => {
    expect(config(["--e2b-api-upstream=http://apiserver-e2b:3000/"]).e2bApiUpstream).toBe("http://apiserver-e2b:3000");
    expect(() => config(["--e2b-api-upstream=http://apiserver-e2b:3000/v1"])).toThrow(UsageError);
    expect(() => config(["--e2b-api-upstream=apiserver:3000"])).toThrow(UsageError);
  });

  test("--metrics-bind-address opens the separate metrics listener; it is off by default", () => {
    expect(config(["--metrics-bind-address=:9090"]).metricsBindAddress).toBe(":9090");
    expect(config(["--metrics-bind-address="]).metricsBindAddress).toBeUndefined();
  });

  test("the relay's bounds are flags: caps, budget and the guest deadline", () => {
    const c = config([
      "--max-relays=10",
      "--max-relays-per-sandbox=3",
      "--max-relays-per-client=2",
      "--max-relays-per-namespace=4",
      "--max-public-relays=5",
      "--max-public-relays-per-sandbox=2",
      "--max-public-relays-per-client=1",
      "--relay-buffer-max=1048576",
      "--guest-handshake-timeout=5s",
      "--wake-timeout=45s",
      "--request-body-min-rate=512",
      "--request-body-rate-window=3s",
    ]);
    expect(c.limits).toEqual({
      maxRelays: 10,
      maxRelaysPerSandbox: 3,
      maxRelaysPerClient: 2,
      maxRelaysPerNamespace: 4,
      maxPublicRelays: 5,
      maxPublicRelaysPerSandbox: 2,
      maxPublicRelaysPerClient: 1,
      bufferBytes: 1048576,
      guestHandshakeMs: 5000,
      wakeTimeoutMs: 45_000,
      requestBodyMinRate: 512,
      requestBodyRateWindowMs: 3000,
      chunkRatePerNamespace: 100_000, // no flag: far above what envd sends (docs/envd-relay.md "Bounds")
    });
    for (const f of ["--max-relays-per-sandbox", "--max-relays-per-namespace", "--max-public-relays", "--max-public-relays-per-client", "--request-body-min-rate"]) expect(envdProxyHelp()).toContain(f);
    // The defaults: public buckets below the tenant's and the process's caps, a body minimum on.
    expect(config([]).limits).toMatchObject({ maxPublicRelays: 64, maxPublicRelaysPerSandbox: 16, maxPublicRelaysPerClient: 8, requestBodyMinRate: 1024, requestBodyRateWindowMs: 10_000 });
    // A wake may take 30 s by default (an archive's restore), then 504; it must be a positive duration.
    expect(config([]).limits.wakeTimeoutMs).toBe(30_000);
    expect(envdProxyHelp()).toContain("--wake-timeout");
  });

  test("an empty namespace means every namespace", () => {
    expect(config(["--namespace="]).namespace).toBe("");
  });

  const usage: [string[], string][] = [
    [["--wake-timeout=0s"], "--wake-timeout"],
    [["--inventory-stale-after=0"], "--inventory-stale-after"],
    [["--inventory-trusted-networks=10.0.0.0"], "--inventory-trusted-networks"],
    [["--bind-address=8443"], "--bind-address"],
    [["--metrics-bind-address=9090"], "--metrics-bind-address"],
    [["--guest-http2=on"], "--guest-http2"],
    [["--max-relays=0"], "--max-relays"],
    [["--relay-buffer-max=0"], "--relay-buffer-max"],
    [["--guest-handshake-timeout=0s"], "--guest-handshake-timeout"],
    [["--bogus"], "--bogus"],
  ];
  for (const [argv, flag] of usage) {
    test(`${argv.join(" ")} is a usage error naming ${flag}`, () => {
      expect(() => parseEnvdProxyFlags(argv, {})).toThrow(UsageError);
      expect(() => parseEnvdProxyFlags(argv, {})).toThrow(flag);
    });
  }

  test("a complete configuration passes the startup checks", () => {
    expect(() => checkEnvdProxyConfig(config(complete))).not.toThrow();
    expect(() => checkEnvdProxyConfig(config([...complete, "--tls-cert-file=/c", "--tls-private-key-file=/k"]))).not.toThrow();
  });

  const failures: [string, string[], string][] = [
    ["only the certificate", [...complete, "--tls-cert-file=/c"], "must be set together"],
    ["only the key", [...complete, "--tls-private-key-file=/k"], "must be set together"],
    ["a blank domain", ["--domain=  ", "--e2b-envd-secret-file=/s", "--sandboxd-token=t"], "no domain configured"],
    ["no secret file", ["--domain=d", "--sandboxd-token=t"], "--e2b-envd-secret-file is required"],
    ["no root token", ["--domain=d", "--e2b-envd-secret-file=/s"], "the node token is required"],
  ];
  for (const [name, argv, message] of failures) {
    test(`${name} stops startup`, () => {
      expect(startupMessage(argv)).toContain(message);
    });
  }

  test("help lists every flag", () => {
    const text = envdProxyHelp();
    for (const spec of Object.values(envdProxyFlags)) expect(text).toContain(`--${spec.flag}`);
  });
});

describe("a real process", () => {
  const main = join(root, "services", "sandbox-envd-proxy", "main.ts");
  const run = (args: string[]) => Bun.spawnSync(["bun", main, ...args], { cwd: root, env: { ...process.env, OPERATOR_LOG_LEVEL: "" } });

  test("a bad flag exits 2 naming it", () => {
    const proc = run(["--bad"]);
    expect(proc.exitCode).toBe(2);
    expect(proc.stderr.toString()).toContain("--bad");
  });

  test("only one TLS flag exits 1 (scenario 1)", () => {
    const proc = run([...complete, "--tls-cert-file=/c"]);
    expect(proc.exitCode).toBe(1);
    expect(proc.stderr.toString()).toContain("--tls-cert-file and --tls-private-key-file must be set together");
  });

  test("valid flags but an unreadable secret file exit 1 naming the flag and the file (scenario 2)", () => {
    const proc = run(complete);
    expect(proc.exitCode).toBe(1);
    expect(proc.stderr.toString()).toContain("--e2b-envd-secret-file: cannot read /secret");
  });
});
