// Synthetic Pod status (§5.7). The Pod is a placeholder; sandboxd holds the real microVM, so status is
// derived from the claim alone. Every time in it comes from the claim (claimedAt, deadline), never from the
// clock, so repeated pushes are deep-equal and the pod controller drops them as duplicates.
import type { V1ContainerStatus, V1Pod, V1PodStatus } from "@kubernetes/client-node";
import type { Claim } from "../claims/index.ts";
import { formatRfc3339Seconds } from "#shared/clock/index.ts";
import { withClaimId } from "./pod-contract.ts";

export const REASON_LEASE_EXPIRED = "SandboxLeaseExpired";
export const REASON_SANDBOX_LOST = "SandboxLost";

/** Host of sandboxd's owner_addr (`host:port`, `[v6]:port`); the whole string when it has no port. */
export function hostOf(address: string): string {
  if (address.includes("://")) {
    try {
      return new URL(address).hostname.replace(/^\[(.*)\]$/, "$1");
    } catch {
      return address;
    }
  }
  const v6 = /^\[([^\]]*)\]:\d*$/.exec(address);
  if (v6) return v6[1]!;
  const i = address.indexOf(":");
  if (i >= 0 && address.indexOf(":", i + 1) < 0) return address.slice(0, i);
  return address;
}

function containers(pod: V1Pod, id: string, state: (c: { name: string; image?: string }) => V1ContainerStatus["state"], ready: boolean) {
  return (pod.spec?.containers ?? []).map(
    (c): V1ContainerStatus => ({
      name: c.name,
      image: c.image ?? "",
      imageID: `sandboxd://${id}`,
      ready,
      restartCount: 0,
      state: state(c),
    }),
  );
}

export function runningStatus(pod: V1Pod, claim: Claim): V1PodStatus {
  const ip = hostOf(claim.address);
  const started = new Date(claim.claimedAt);
  const cond = (type: string) => ({ type, status: "True", lastTransitionTime: started });
  const status: V1PodStatus = {
    phase: "Running",
    startTime: started,
    conditions: [cond("Initialized"), cond("Ready"), cond("PodScheduled")],
    containerStatuses: containers(pod, claim.id, () => ({ running: { startedAt: started } }), true),
  };
  if (ip) {
    status.hostIP = ip;
    status.podIP = ip;
    status.podIPs = [{ ip }];
  }
  return status;
}

export function expiredStatus(pod: V1Pod, claim: Claim): V1PodStatus {
  const finishedAt = new Date(claim.deadline);
  return {
    phase: "Failed",
    reason: REASON_LEASE_EXPIRED,
    message: `sandbox ${claim.id} lease expired at ${formatRfc3339Seconds(claim.deadline)}; sandboxd reaped the microVM`,
    startTime: new Date(claim.claimedAt),
    containerStatuses: containers(
      pod,
      claim.id,
      () => ({ terminated: { exitCode: 1, reason: REASON_LEASE_EXPIRED, finishedAt } }),
      false,
    ),
  };
}

/**
 * Lost: two successful listings in a row lacked the sandbox before its deadline (deleted by an operator, lost in a
 * node failure). Beyond upstream, which kept showing Running until the cached 24 h deadline.
 */
export function lostStatus(pod: V1Pod, claim: Claim, now: number): V1PodStatus {
  const finishedAt = new Date(now);
  return {
    phase: "Failed",
    reason: REASON_SANDBOX_LOST,
    message: lostMessage(claim),
    startTime: new Date(claim.claimedAt),
    containerStatuses: containers(pod, claim.id, () => ({ terminated: { exitCode: 1, reason: REASON_SANDBOX_LOST, finishedAt } }), false),
  };
}

export function lostMessage(claim: Claim): string {
  return `sandbox ${claim.id} is no longer listed by sandboxd before its deadline (deleted out of band or lost with its node); nothing is left to release`;
}

/** The whole Pod as pushed: a copy with the claim-id annotation and the given status. */
export function podWithStatus(pod: V1Pod, claim: Claim, status: V1PodStatus): V1Pod {
  return { ...withClaimId(pod, claim.id), status };
}

export function pastDeadline(claim: Claim, now: number): boolean {
  return claim.deadline !== 0 && now >= claim.deadline;
}
