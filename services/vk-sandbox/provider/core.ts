// The provider's shared internals, handed to each verb and loop module: state, the sandboxd slices, the
// owner reader, the clock, the logger and the status push. Nothing here knows about queues.
import type { V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Claim } from "../claims/index.ts";
import { isNotFound } from "#shared/sandboxd/index.ts";
import { ProviderState } from "./state.ts";
import type { Clock } from "#shared/clock/index.ts";
import type { OwnerReader, ProviderEvents, SandboxClaimer, SandboxLister, SandboxReader, SandboxReleaser } from "./types.ts";

/**
 * A release started on behalf of a failed create must not be abandoned with it: it runs detached, with its
 * own deadline, because the claim it ends is already on sandboxd and its token exists only in our memory.
 */
export const DETACHED_RELEASE_TIMEOUT_MS = 10_000;

export class ReleaseTimeout extends Error {
  constructor(id: string) {
    super(`release of ${id} timed out after ${DETACHED_RELEASE_TIMEOUT_MS / 1000}s`);
    this.name = "ReleaseTimeout";
  }
}

/** What the verb and loop modules share, named: the provider builds one from its deps. */
export interface CoreParts {
  nodeName: string;
  claimer: SandboxClaimer;
  releaser: SandboxReleaser;
  lister: SandboxLister;
  reader: SandboxReader;
  /** Absent = no dynamic client: every owned Pod's claim is preserved. */
  ownerReader: OwnerReader | undefined;
  clock: Clock;
  log: Logger;
  st: ProviderState;
  events?: ProviderEvents;
}

export class Core {
  readonly nodeName: string;
  readonly claimer: SandboxClaimer;
  readonly releaser: SandboxReleaser;
  readonly lister: SandboxLister;
  readonly reader: SandboxReader;
  readonly ownerReader: OwnerReader | undefined;
  readonly clock: Clock;
  readonly log: Logger;
  readonly st: ProviderState;
  private pushFn: ((pod: V1Pod) => void) | undefined;
  private retryFn: ((key: string) => void) | undefined;
  /** Warning events on a Pod; absent in tests that do not look at them. */
  events: ProviderEvents | undefined;

  constructor(p: CoreParts) {
    this.nodeName = p.nodeName;
    this.claimer = p.claimer;
    this.releaser = p.releaser;
    this.lister = p.lister;
    this.reader = p.reader;
    this.ownerReader = p.ownerReader;
    this.clock = p.clock;
    this.log = p.log;
    this.st = p.st;
    this.events = p.events;
  }

  setPush(fn: (pod: V1Pod) => void): void {
    this.pushFn = fn;
  }

  /** A Warning event on the Pod (a lost sandbox). Never blocks; failures are the recorder's to log. */
  warning(pod: V1Pod, reason: string, message: string): void {
    try {
      this.events?.warning(pod, reason, message);
    } catch (e) {
      this.log.error({ err: e, reason }, "event record failed");
    }
  }

  setRetry(fn: (key: string) => void): void {
    this.retryFn = fn;
  }

  /** Ask the machinery to sync `key` now (sandboxd came back, a claim for a waiting Pod was found). Never blocks. */
  retry(key: string): void {
    try {
      this.retryFn?.(key);
    } catch (e) {
      this.log.error({ err: e, pod: key }, "retry request failed");
    }
  }

  /** Hand a whole Pod to the machinery. Never blocks; a push before notifyPods was wired is dropped. */
  push(pod: V1Pod): void {
    try {
      this.pushFn?.(pod);
    } catch (e) {
      this.log.error({ err: e, pod: `${pod.metadata?.namespace}/${pod.metadata?.name}` }, "status push failed");
    }
  }

  now(): number {
    return this.clock.now();
  }

  /** Release with the claim's own token; a 404 (already gone) counts as released. */
  async release(claim: Claim): Promise<"released" | "already-gone"> {
    try {
      return await this.releaser.release(claim.id, { token: claim.token });
    } catch (e) {
      if (isNotFound(e)) return "already-gone";
      throw e;
    }
  }

  /** Release under the detached 10 s deadline (the create that asked for it has already failed). */
  releaseDetached(claim: Claim): Promise<"released" | "already-gone"> {
    return new Promise((resolve, reject) => {
      const timer = this.clock.after(DETACHED_RELEASE_TIMEOUT_MS, () => reject(new ReleaseTimeout(claim.id)));
      this.release(claim).then(
        (r) => {
          timer.cancel();
          resolve(r);
        },
        (e) => {
          timer.cancel();
          reject(e);
        },
      );
    });
  }
}
