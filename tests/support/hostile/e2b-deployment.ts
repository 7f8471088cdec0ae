// Deployment 1 for the rig: `sandbox-e2b` with its in-process envd proxy as its own process (the real entry point,
// so its RSS and CPU are its own), on simulated sandboxd nodes in this process. The second tenant's sandboxes reach
// the shared test guest; the attacker's sandbox gets the hostile guest through attachGuest.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSimCluster, type SimCluster } from "#services/sandboxd-sim/sim.ts";
import { spawnE2b, type Child } from "#tests/integration/e2b/process.ts";
import { startTestGuest, type TestGuest } from "#tests/integration/e2b/guest.ts";
import { stopChild } from "./stop.ts";
import type { Deployment } from "./rig.ts";
import type { TenantOpts } from "./tenant.ts";

export const TENANT_KEY = "e2b_tenanttenanttenanttenanttenanttenant00";
export const ATTACKER_KEY = "e2b_attackerattackerattackerattacker000000";
const ROOT = "root-hostile-rig";
const DOMAIN = "hostile.test";
const TEMPLATE = "img";

/** The attacker's quota: enough for its own sandbox and a few more, so a create flood meets 429 (issue 17 case 9). */
export const ATTACKER_MAX_SANDBOXES = 4;

/** Both deployments' key file: the tenant without a quota, the attacker with one. */
export function keyFile(): string {
  return `${TENANT_KEY} tenant\n${ATTACKER_KEY} attacker max-sandboxes=${ATTACKER_MAX_SANDBOXES} creates-per-second=2\n`;
}

export interface RunningDeployment {
  deployment: Deployment;
  tenant: TenantOpts;
  /** Output of the server processes, for a failure message. */
  output(): string;
  stop(): Promise<void>;
}

export async function startE2bDeployment(extraFlags: string[] = []): Promise<RunningDeployment> {
  const cluster: SimCluster = await startSimCluster(1, { rootToken: ROOT, pools: [`${TEMPLATE}/none/small=12`] });
  const guest: TestGuest = await startTestGuest();
  cluster.nodes[0]!.attachGuest("*", 49983, guest.port);
  const dir = mkdtempSync(join(tmpdir(), "hostile-e2b-"));
  writeFileSync(join(dir, "secret"), "hostile-secret\n");
  writeFileSync(join(dir, "keys"), keyFile());
  let child: Child | undefined;
  try {
    child = spawnE2b([
      `--sandboxd-seeds=${cluster.nodes[0]!.addr}`,
      `--sandboxd-token=${ROOT}`,
      "--inventory-poll=1s",
      "--e2b-bind-address=127.0.0.1:0",
      "--envd-proxy-bind-address=127.0.0.1:0",
      "--metrics-bind-address=127.0.0.1:0",
      `--e2b-domain=${DOMAIN}`,
      `--e2b-envd-secret-file=${join(dir, "secret")}`,
      `--e2b-api-key-file=${join(dir, "keys")}`,
      ...extraFlags,
    ]);
    const apiPort = Number((await child.waitFor("e2b surface listening", 30_000)).port);
    const proxyPort = Number((await child.waitFor("envd proxy listening", 30_000)).port);
    const metricsPort = Number((await child.waitFor("metrics listening", 30_000)).port);
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    const sandboxUrl = `http://127.0.0.1:${proxyPort}`;
    const opts = (apiKey: string): TenantOpts => ({ apiKey, apiUrl, sandboxUrl, domain: DOMAIN, requestTimeoutMs: 10_000 });
    const c = child;
    return {
      deployment: {
        name: "sandbox-e2b",
        proxyPid: child.proc.pid,
        proxy: { host: "127.0.0.1", port: proxyPort },
        metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
        healthUrls: [`${sandboxUrl}/healthz`, `${apiUrl}/health`],
        domain: DOMAIN,
        template: TEMPLATE,
        attacker: opts(ATTACKER_KEY),
        attach: (publicId, port, localPort) => cluster.nodes[0]!.attachGuest(publicId.replace(/^sb-/, "sb_"), port, localPort),
      },
      tenant: opts(TENANT_KEY),
      output: () => c.output(),
      stop: async () => {
        await stopChild(c);
        await guest.stop();
        await cluster.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    if (child) await stopChild(child);
    await guest.stop();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
