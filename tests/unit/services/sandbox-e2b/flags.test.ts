// sandbox-e2b's flags (e2b.md §7): seeds, poll tick, the shared --e2b-* rows, the in-process proxy, and
// exit codes of a real process.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { UsageError, e2bFlags } from "#shared/config/index.ts";
import { DEFAULT_RELAY_LIMITS } from "#shared/relay/index.ts";
import {
  checkE2bMeshConfig,
  e2bMeshFlags,
  e2bMeshHelp,
  parseE2bMeshFlags,
} from "#services/sandbox-e2b/flags.ts";
import { flagReaders } from "../flags-fixture.ts";

const root = join(import.meta.dir, "..", "..", "..", "..");
const complete = ["--sandboxd-seeds=10.0.0.5:7777, 10.0.0.6:7777", "--e2b-domain=sb.example.com", "--e2b-allow-anonymous", "--e2b-envd-secret-file=/s"];

const { config, startupMessage } = flagReaders(parseE2bMeshFlags, checkE2bMeshConfig);

describe("sandbox-e2b flags", () => {
  test("defaults: no seeds, a 10s poll, no in-process proxy, the e2b defaults", () => {
    const c = config();
    expect(c.sandboxdSeeds).toEqual([]);
    expect(c.inventoryPoll).toBe(10_000);
    expect(c.envdProxy).toBeUndefined();
    expect(c.metricsBindAddress).toBeUndefined();
    expect(c.e2b).toMatchObject({ bindAddress: ":8080", envdVersion: "0.8.0", defaultTimeoutSeconds: 300 });
    expect(c.publicTraffic).toEqual({ defaultPublic: true, forbid: false });
  });

  test("public ports: --public-traffic-default=false and --forbid-public-traffic", () => {
    expect(config(["--public-traffic-default=false"]).publicTraffic).toEqual({ defaultPublic: false, forbid: false });
    expect(config(["--forbid-public-traffic"]).publicTraffic).toEqual({ defaultPublic: true, forbid: true });
  });

  test("it takes every --e2b-* flag but not --enable-e2b-api (always served)", () => {
    const names = Object.values(e2bMeshFlags).map((spec) => spec.flag);
    for (const spec of Object.values(e2bFlags)) expect(names).toContain(spec.flag);
    expect(names).not.toContain("enable-e2b-api");
  });

  test("seeds are split and trimmed; the in-process proxy appears with its bind address", () => {
    const c = config([...complete, "--envd-proxy-bind-address=:8443", "--envd-proxy-guest-http2"]);
    expect(c.sandboxdSeeds).toEqual(["10.0.0.5:7777", "10.0.0.6:7777"]);
    expect(c.envdProxy).toEqual({ bindAddress: ":8443", tlsCertFile: undefined, tlsPrivateKeyFile: undefined, guestHttp2: true, limits: DEFAULT_RELAY_LIMITS });
    const bounded = config([
      ...complete,
      "--envd-proxy-bind-address=:8443",
      "--envd-proxy-max-relays-per-sandbox=4",
      "--envd-proxy-guest-handshake-timeout=2s",
      "--envd-proxy-wake-timeout=5s",
      "--envd-proxy-max-public-relays=6",
      "--envd-proxy-max-public-relays-per-sandbox=3",
      "--envd-proxy-max-public-relays-per-client=2",
      "--envd-proxy-request-body-min-rate=0",
      "--envd-proxy-request-body-rate-window=4s",
    ]);
    expect(bounded.envdProxy?.limits).toMatchObject({
      maxRelaysPerSandbox: 4,
      guestHandshakeMs: 2000,
      wakeTimeoutMs: 5000,
      maxPublicRelays: 6,
      maxPublicRelaysPerSandbox: 3,
      maxPublicRelaysPerClient: 2,
      requestBodyMinRate: 0,
      requestBodyRateWindowMs: 4000,
    });
  });

  test("--metrics-bind-address opens the process's one metrics listener", () => {
    expect(config([...complete, "--metrics-bind-address=127.0.0.1:9090"]).metricsBindAddress).toBe("127.0.0.1:9090");
  });

  const usage: [string[], string][] = [
    [["--metrics-bind-address=9090"], "--metrics-bind-address"],
    [["--inventory-poll=0"], "--inventory-poll"],
    [["--inventory-poll=10"], "--inventory-poll"],
    [["--e2b-envd-version=eight"], "--e2b-envd-version"],
    [["--envd-proxy-bind-address=8443"], "--envd-proxy-bind-address"],
    [["--enable-e2b-api"], "--enable-e2b-api"],
  ];
  for (const [argv, flag] of usage) {
    test(`${argv.join(" ")} is a usage error naming ${flag}`, () => {
      expect(() => parseE2bMeshFlags(argv, {})).toThrow(UsageError);
      expect(() => parseE2bMeshFlags(argv, {})).toThrow(flag);
    });
  }

  test("startup needs a seed, the e2b essentials, and a whole proxy TLS pair", () => {
    expect(() => checkE2bMeshConfig(config(complete))).not.toThrow();
    expect(startupMessage(complete.slice(1))).toContain("--sandboxd-seeds is required");
    expect(startupMessage(["--sandboxd-seeds= , "])).toContain("--sandboxd-seeds is required");
    expect(startupMessage(complete.filter((a) => a !== "--e2b-allow-anonymous"))).toContain("no API key configured");
    expect(startupMessage([...complete, "--envd-proxy-bind-address=:8443", "--envd-proxy-tls-cert-file=/c"])).toContain("must be set together");
  });

  test("help lists every flag and OPERATOR_LOG_LEVEL", () => {
    const text = e2bMeshHelp();
    for (const spec of Object.values(e2bMeshFlags)) expect(text).toContain(`--${spec.flag}`);
    expect(text).toContain("OPERATOR_LOG_LEVEL");
  });
});

describe("a real process", () => {
  const main = join(root, "services", "sandbox-e2b", "main.ts");
  const run = (args: string[]) => Bun.spawnSync(["bun", main, ...args], { cwd: root, env: { ...process.env, OPERATOR_LOG_LEVEL: "" } });

  test("a bad flag exits 2 naming it", () => {
    const proc = run(["--bad"]);
    expect(proc.exitCode).toBe(2);
    expect(proc.stderr.toString()).toContain("--bad");
  });

  test("a bad envd version exits 2 naming the flag and the value", () => {
    const proc = run(["--e2b-envd-version=0.8"]);
    expect(proc.exitCode).toBe(2);
    expect(proc.stderr.toString()).toContain('invalid value "0.8" for flag --e2b-envd-version');
  });

  test("no seeds exits 1 with one error line naming the flag", () => {
    const proc = run([]);
    expect(proc.exitCode).toBe(1);
    const errors = proc.stderr.toString().trim().split("\n").filter((l) => l.includes('"level":"error"'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain("--sandboxd-seeds");
  });

  test("valid flags but an unreadable secret file exit 1 naming the flag and the file", () => {
    const proc = run(complete);
    expect(proc.exitCode).toBe(1);
    expect(proc.stderr.toString()).toContain("--e2b-envd-secret-file: cannot read /s");
  });
});
