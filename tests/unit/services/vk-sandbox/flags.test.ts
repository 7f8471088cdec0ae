// vk-sandbox's flags: seed 000's defaults and environment variables, §1's validation and derived
// values, and the exit codes a real process gives for bad input.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import {
  advertiseAddrFromUrl,
  parseNodeLabels,
  parseVkSandboxFlags,
  vkSandboxFlags,
  vkSandboxHelp,
} from "#services/vk-sandbox/flags.ts";
import { flagReaders } from "../flags-fixture.ts";

const root = join(import.meta.dir, "..", "..", "..", "..");

const { config, usageMessage } = flagReaders(parseVkSandboxFlags);

describe("vk-sandbox defaults (seed 000)", () => {
  test("every default is the seed's", () => {
    const c = config();
    expect(c).toMatchObject({
      nodeName: "vk-sandboxd",
      nodeIp: undefined,
      listenAddr: ":10260",
      listenPort: 10260,
      tlsCert: undefined,
      tlsKey: undefined,
      kubeApiQps: 200,
      kubeApiBurst: 400,
      sandboxdUrl: "http://127.0.0.1:7777",
      sandboxdAdvertiseAddr: "127.0.0.1:7777",
      sandboxdTokenFile: undefined,
      statePath: "/var/lib/vk-sandbox/claims.json",
      orphanScanInterval: 60_000,
      publishInventory: false,
      publishInterval: 30_000,
      nodeLabels: { "sandbox.cocoonstack.io/runtime": "sandboxd" },
      disablePodEvents: false,
    });
    expect(c.nodeCpu.string).toBe("4k");
    expect(c.nodeCpu.value).toBe(4000);
    expect(c.nodeMemory.string).toBe("8Ti");
    expect(c.nodePods.value).toBe(2000);
  });

  test("each seed environment variable feeds its flag", () => {
    const c = config([], {
      VK_NODE_NAME: "n1-sandboxd",
      VK_NODE_IP: "10.1.2.3",
      VK_LISTEN_ADDR: ":10261",
      VK_TLS_CERT: "/c.crt",
      VK_TLS_KEY: "/c.key",
      VK_NODE_CPU: "64",
      VK_NODE_MEMORY: "256Gi",
      VK_NODE_PODS: "110",
      SANDBOXD_URL: "http://10.0.0.5:7777/",
      SANDBOXD_ADVERTISE_ADDR: "node-1:7777",
      SANDBOXD_TOKEN_FILE: "/etc/vk-sandbox/sandboxd-token",
      VK_STATE_PATH: "/tmp/claims.json",
    });
    expect(c).toMatchObject({
      nodeName: "n1-sandboxd",
      nodeIp: "10.1.2.3",
      listenPort: 10261,
      tlsCert: "/c.crt",
      tlsKey: "/c.key",
      sandboxdUrl: "http://10.0.0.5:7777",
      sandboxdAdvertiseAddr: "node-1:7777",
      sandboxdTokenFile: "/etc/vk-sandbox/sandboxd-token",
      statePath: "/tmp/claims.json",
    });
    expect([c.nodeCpu.string, c.nodeMemory.string, c.nodePods.string]).toEqual(["64", "256Gi", "110"]);
  });

  test("the tuning flags have no environment variable", () => {
    for (const key of ["kubeApiQps", "kubeApiBurst", "orphanScanInterval", "publishInventory", "publishInterval", "nodeLabels", "disablePodEvents"] as const) {
      expect(vkSandboxFlags[key].env).toBeUndefined();
    }
  });
});

describe("vk-sandbox precedence (spec scenarios 2 and 4)", () => {
  test("VK_NODE_NAME=a with --node-name=b gives b", () => {
    expect(config(["--node-name=b"], { VK_NODE_NAME: "a" }).nodeName).toBe("b");
  });

  test('VK_STATE_PATH="" uses the default path', () => {
    expect(config([], { VK_STATE_PATH: "" }).statePath).toBe("/var/lib/vk-sandbox/claims.json");
  });

  test("--state-path= is refused even when VK_STATE_PATH is set", () => {
    expect(usageMessage(["--state-path="], { VK_STATE_PATH: "/x" })).toContain("--state-path");
  });
});

describe("vk-sandbox validation", () => {
  const cases: [string[], string][] = [
    [["--listen-addr=10260"], "--listen-addr"],
    [["--listen-addr=:0"], "--listen-addr"],
    [["--listen-addr=:70000"], "--listen-addr"],
    [["--node-memory=banana"], "--node-memory"],
    [["--node-cpu=4 cores"], "--node-cpu"],
    [["--node-pods="], "--node-pods"],
    [["--kube-api-qps=fast"], "--kube-api-qps"],
    [["--kube-api-burst=1.5"], "--kube-api-burst"],
    [["--orphan-scan-interval=60"], "--orphan-scan-interval"],
    [["--publish-interval=0"], "--publish-interval"],
    [["--publish-interval=-30s"], "--publish-interval"],
    [["--publish-inventory=yes"], "--publish-inventory"],
    [["--bogus"], "--bogus"],
  ];
  for (const [argv, flag] of cases) {
    test(`${argv.join(" ")} is a usage error naming ${flag}`, () => {
      expect(usageMessage(argv)).toContain(flag);
    });
  }

  test("a bad quantity from the environment names the variable", () => {
    expect(usageMessage([], { VK_NODE_MEMORY: "banana" })).toContain("VK_NODE_MEMORY");
  });

  test("QPS is a float and may be 0 or negative; burst is an int", () => {
    expect(config(["--kube-api-qps=0.5", "--kube-api-burst=0"])).toMatchObject({ kubeApiQps: 0.5, kubeApiBurst: 0 });
    expect(config(["--kube-api-qps", "-1"]).kubeApiQps).toBe(-1);
  });

  test("an orphan scan interval of 0 disables the scan", () => {
    expect(config(["--orphan-scan-interval=0"]).orphanScanInterval).toBe(0);
    expect(config(["--orphan-scan-interval=1m30s"]).orphanScanInterval).toBe(90_000);
  });

  test("an IPv6 listen address keeps its port", () => {
    expect(config(["--listen-addr=[::]:10250"]).listenPort).toBe(10250);
  });
});

describe("derived values", () => {
  test("the advertise address defaults to the URL's host and port", () => {
    const cases: [string, string][] = [
      ["http://127.0.0.1:7777", "127.0.0.1:7777"],
      ["http://10.0.0.5:7777/", "10.0.0.5:7777"],
      ["http://node-1", "node-1"],
      ["http://node-1:80", "node-1:80"], // Go keeps an explicit default port; WHATWG URL would drop it
      ["https://[fd00::1]:7777/api/", "[fd00::1]:7777"],
      ["http://user:pw@node-1:7777", "node-1:7777"],
      ["10.0.0.5:7777/", "10.0.0.5:7777"], // not a URL with a host: used raw, minus trailing slash
      ["unix:///run/sandboxd.sock", "unix:///run/sandboxd.sock"],
    ];
    for (const [url, addr] of cases) expect(advertiseAddrFromUrl(url)).toBe(addr);
    expect(config(["--sandboxd-url=http://node-7:7777//"])).toMatchObject({
      sandboxdUrl: "http://node-7:7777",
      sandboxdAdvertiseAddr: "node-7:7777",
    });
  });

  test("an explicit advertise address wins over the URL", () => {
    expect(config(["--sandboxd-url=http://127.0.0.1:7777", "--sandboxd-advertise-addr=10.0.0.9:7777"]).sandboxdAdvertiseAddr).toBe("10.0.0.9:7777");
  });

  test("node labels parse per §2.1", () => {
    expect(parseNodeLabels("a=1, b=2 ,c=,=skip,noeq,a=3")).toEqual({ a: "3", b: "2", c: "" });
    expect(parseNodeLabels("k=v=w")).toEqual({ k: "v=w" });
    expect(parseNodeLabels("")).toEqual({});
    expect(config(["--node-labels=zone=z1"]).nodeLabels).toEqual({ zone: "z1" }); // replaces the default
  });
});

describe("help", () => {
  test("lists every flag, its environment variable and VK_LOG_LEVEL", () => {
    const text = vkSandboxHelp();
    for (const spec of Object.values(vkSandboxFlags)) {
      expect(text).toContain(`--${spec.flag}`);
      if (spec.env) expect(text).toContain(spec.env);
    }
    expect(text).toContain("VK_LOG_LEVEL");
    expect(text).toMatch(/--sandboxd-advertise-addr <string>\s+SANDBOXD_ADVERTISE_ADDR\s+host:port of --sandboxd-url/);
  });
});

describe("a real process", () => {
  const main = join(root, "services", "vk-sandbox", "main.ts");

  test("an unknown flag exits 2 naming the flag", () => {
    const proc = Bun.spawnSync(["bun", main, "--bad"], { cwd: root, env: { ...process.env, KUBECONFIG: "" } });
    expect(proc.exitCode).toBe(2);
    expect(proc.stderr.toString()).toContain("--bad");
  });

  test("an unparsable quantity exits 2 naming the flag and the value", () => {
    const proc = Bun.spawnSync(["bun", main, "--node-memory=banana"], { cwd: root });
    expect(proc.exitCode).toBe(2);
    expect(proc.stderr.toString()).toContain("--node-memory");
    expect(proc.stderr.toString()).toContain("banana");
  });

  test("--version prints the version line and exits 0", () => {
    const proc = Bun.spawnSync(["bun", main, "--version"], { cwd: root });
    expect(proc.exitCode).toBe(0);
    expect(proc.stdout.toString()).toMatch(/^vk-sandbox \S+ \(rev=\S+ built=\S+\)\n$/);
  });
});
