// Issue 17's hostile-tenant rig, one describe per deployment: while an attacker with its own key and sandbox runs
// every hostile guest reply and every hostile client pattern at once (tests/support/hostile/), a second tenant's
// real e2b SDK keeps working. Within the same run: its calls all succeed and their p99 stays within 3x of the
// baseline phase (less what the attack's code in this process adds, measured there: the floor), the proxy's RSS stays under 256 MiB above idle, health answers throughout, and after the attack
// every gauge on the proxy's /metrics is back at its idle value with no connection left at the guest.
// HOSTILE_ONLY=stalled,junk (parts: stalled http ws upgrade-drop junk envd drain, or one case: http/neg-chunk) runs a
// subset, to measure one case alone (docs/hostile-tenants.md has the figures per case).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startHostileGuest, type HostileGuest } from "#tests/support/hostile/guest.ts";
import { DEFAULT_PLAN, describeResult, floorRise, runRig, type RigPlan, type RigResult } from "#tests/support/hostile/rig.ts";
import { startE2bDeployment, type RunningDeployment } from "#tests/support/hostile/e2b-deployment.ts";
import { startKubeDeployment } from "#tests/support/hostile/kube-deployment.ts";
import { startTenant, type Tenant } from "#tests/support/hostile/tenant.ts";
import { Started } from "#tests/support/started.ts";

const RSS_BOUND = 256 * 1024 * 1024;
const only = process.env.HOSTILE_ONLY ? new Set(process.env.HOSTILE_ONLY.split(",")) : undefined;
const PLAN: RigPlan = { ...DEFAULT_PLAN, ...(only ? { only } : {}) };

/** The rig's claims, each asserted on its own so a failure names the one that broke. */
function rigClaims(result: () => RigResult) {
  test("the second tenant's calls all succeed under attack (fresh create-then-use included)", () => {
    const r = result();
    expect(r.aborted).toBeUndefined();
    expect(r.baseline.failures).toEqual([]);
    expect(r.attack.failures).toEqual([]);
    expect(r.attack.fresh).toBeGreaterThan(0);
  });
  // The tenant's files.* calls are served by the simulated node and guest in this process, where the attack's own
  // code (hostile guest, attack clients) also runs: what it adds there is measured in the same run by a do-nothing
  // server beside them (the floor) and taken off, so the claim is about what the deployment does to the tenant
  // (docs/hostile-tenants.md "The floor").
  test("the second tenant's p99 under attack, less the floor's rise in the test process, stays within 3x of its baseline", () => {
    const r = result();
    expect(r.attack.p99 - floorRise(r)).toBeLessThanOrEqual(3 * r.baseline.p99);
  });
  test("the proxy's RSS stays under 256 MiB above idle", () => {
    const r = result();
    expect(r.rss.peakAttack - r.rss.idle).toBeLessThan(RSS_BOUND);
  });
  test("health answers throughout the attack and after it", () => {
    expect(result().health.failures).toEqual([]);
  });
  test("after the attack every relay gauge is back at idle and the guest holds no connection", () => {
    const r = result();
    expect(r.gauges.offIdleAfter).toEqual({});
    expect(r.guestOpenAfter).toBe(0);
  });
}

describe("sandbox-e2b (in-process proxy) under a hostile tenant", () => {
  const started = new Started();
  let result: RigResult;
  beforeAll(async () => {
    const dep: RunningDeployment = await started.track(startE2bDeployment());
    const guest: HostileGuest = await started.track(startHostileGuest());
    const tenant: Tenant = await started.track(startTenant(dep.tenant, dep.deployment.template));
    result = await runRig(dep.deployment, tenant, guest, PLAN);
    console.log(describeResult(result));
  }, 150_000);
  // The tenant, the guest, then the deployment; also what a timed-out beforeAll was still starting.
  afterAll(() => started.stopAll());
  rigClaims(() => result);
});

describe("sandbox-apiserver + sandbox-envd-proxy (real kube-apiserver) under a hostile tenant", () => {
  const started = new Started();
  let result: RigResult;
  beforeAll(async () => {
    const dep: RunningDeployment = await started.track(startKubeDeployment());
    const guest: HostileGuest = await started.track(startHostileGuest());
    const tenant: Tenant = await started.track(startTenant(dep.tenant, dep.deployment.template));
    result = await runRig(dep.deployment, tenant, guest, PLAN);
    console.log(describeResult(result));
  }, 240_000);
  // The tenant, the guest, then the deployment; also what a timed-out beforeAll was still starting.
  afterAll(() => started.stopAll());
  rigClaims(() => result);
});
