// Deployment 2 for the rig: the chart's shape without the cluster around it. A real kube-apiserver with the chart's
// CRDs and RBAC (tests/integration/sandbox-apiserver/fixture.ts), sandbox-apiserver serving the e2b surface
// (--enable-e2b-api, warm-pool driver off) and sandbox-envd-proxy, each its own process from its real entry point,
// on one simulated node in this process. The rig plays vk-sandbox: it publishes the node's NodeInventory every 2 s
// (the local stack's period), so a fresh sandbox is not in inventory for up to that long and its first request goes
// through the proxy's probe path, which the junk lookups attack.
import { writeFileSync } from "node:fs";
import { Sandbox } from "e2b";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { spawnService, type Child } from "#tests/integration/e2b/process.ts";
import { startTestGuest, type TestGuest } from "#tests/integration/e2b/guest.ts";
import { rfc3339, startStack, type ApiserverProcess, type Stack } from "#tests/integration/sandbox-apiserver/fixture.ts";
import { freePorts } from "#tests/kube/ports.ts";
import { ATTACKER_KEY, TENANT_KEY, keyFile, type RunningDeployment } from "./e2b-deployment.ts";
import { stopChild } from "./stop.ts";
import type { TenantOpts } from "./tenant.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "root-hostile-kube";
const DOMAIN = "hostile-kube.test";
const TEMPLATE = "img";
const PUBLISH_EVERY_MS = 2_000;

export async function startKubeDeployment(): Promise<RunningDeployment> {
  const stack: Stack = await startStack();
  let sim: SandboxdSim | undefined;
  let guest: TestGuest | undefined;
  let server: ApiserverProcess | undefined;
  let proxy: Child | undefined;
  let publishing = true;
  let publisher: Promise<void> = Promise.resolve();
  const stopAll = async () => {
    publishing = false;
    await publisher;
    if (proxy) await stopChild(proxy);
    if (server) await stopChild(server);
    await guest?.stop();
    await sim?.stop();
    await stack.stop();
  };
  try {
    sim = await startSandboxdSim({ rootToken: ROOT, pools: [`${TEMPLATE}/none/small=12`] });
    guest = await startTestGuest();
    sim.attachGuest("*", 49983, guest.port);
    writeFileSync(join(stack.dir, "keys"), keyFile());
    writeFileSync(join(stack.dir, "secret"), "hostile-kube-secret\n");
    writeFileSync(join(stack.dir, "token"), `${ROOT}\n`);
    const s = sim;
    const publish = () =>
      stack.publish({
        node: "hostile-node",
        address: s.addr,
        publishedAt: rfc3339(Date.now()),
        pools: s.info().pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target })),
        entries: s.claims().map((c) => ({ name: c.claimRef || c.id, id: c.id, phase: "Running", template: c.key.template, ...(c.claimRef ? { claimRef: c.claimRef } : {}) })),
      });
    await publish();
    publisher = (async () => {
      while (publishing) {
        await Bun.sleep(PUBLISH_EVERY_MS);
        if (publishing) await publish().catch(() => undefined);
      }
    })();
    const [e2bPort] = freePorts(1);
    server = await stack.startServer({
      args: [
        `--sandboxd-token=${ROOT}`,
        "--enable-warm-pool-driver=false",
        "--enable-e2b-api",
        `--e2b-bind-address=127.0.0.1:${e2bPort}`,
        `--e2b-domain=${DOMAIN}`,
        `--e2b-api-key-file=${join(stack.dir, "keys")}`,
        `--e2b-envd-secret-file=${join(stack.dir, "secret")}`,
      ],
    });
    proxy = spawnService(
      "sandbox-envd-proxy",
      ["--bind-address=127.0.0.1:0", "--metrics-bind-address=127.0.0.1:0", `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(stack.dir, "secret")}`, `--sandboxd-token-file=${join(stack.dir, "token")}`],
      { KUBECONFIG: stack.admin },
    );
    const proxyPort = Number((await proxy.waitFor("envd proxy listening", 30_000)).port);
    const metricsPort = Number((await proxy.waitFor("metrics listening", 30_000)).port);
    const apiUrl = `http://127.0.0.1:${e2bPort}`;
    const sandboxUrl = `http://127.0.0.1:${proxyPort}`;
    const opts = (apiKey: string): TenantOpts => ({ apiKey, apiUrl, sandboxUrl, domain: DOMAIN, requestTimeoutMs: 10_000 });
    // The e2b surface claims only on nodes its NodeInventory view holds: wait for the first publish to arrive.
    const first = await waitForClaimable(opts(TENANT_KEY));
    if (!first) throw new Error(`sandbox-apiserver's e2b surface never answered a create:\n${server.stderr()}`);
    const p = proxy;
    const srv = server;
    return {
      deployment: {
        name: "sandbox-apiserver + sandbox-envd-proxy",
        proxyPid: proxy.proc.pid,
        apiPid: server.proc.pid,
        proxy: { host: "127.0.0.1", port: proxyPort },
        metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
        healthUrls: [`${sandboxUrl}/healthz`, `${apiUrl}/health`],
        domain: DOMAIN,
        template: TEMPLATE,
        attacker: opts(ATTACKER_KEY),
        attach: (publicId, port, localPort) => s.attachGuest(publicId.replace(/^sb-/, "sb_"), port, localPort),
      },
      tenant: opts(TENANT_KEY),
      output: () => `${srv.stderr()}\n${p.output()}`,
      stop: stopAll,
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}

/** Creates and kills one sandbox, retrying while the fleet view has not seen the node yet. */
async function waitForClaimable(opts: TenantOpts): Promise<boolean> {
  return waitFor("a create through sandbox-apiserver's e2b surface", async () => {
    const sbx = await Sandbox.create(TEMPLATE, opts);
    await sbx.kill().catch(() => undefined);
    return true;
  }, 30_000, 250).catch(() => false);
}
