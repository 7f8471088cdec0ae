// Registers the virtual Node once and keeps its status fresh (§2.2).
//
// Lifecycle: `ensure()` (fatal on failure, the caller exits), then `start()` for the 60 s status loop, then
// `markReady()` for the immediate readiness push. The constructor does nothing. A Node deleted while we run is not
// recreated: the first status patch that meets NotFound flips `gone`, stops the loop and resolves `whenGone`, so the
// Lease loop and the NodeInventory publisher stop writing objects owned by a Node that no longer exists. A restart
// registers it again.
//
// No ping loop: the Go library gates status patches and Lease renewals on a 10 s provider ping, but this provider's
// ping is always healthy (sandboxd's health shows in Pod status, not in node readiness), so the gate would only
// ever add a first-round delay.
import type { V1Node } from "@kubernetes/client-node";
import type { KubeClient } from "#shared/kube/index.ts";
import { isConflict, isNotFound } from "#shared/kube/index.ts";
import { Nodes } from "#shared/kube/index.ts";
import { type Clock, realClock } from "#shared/clock/index.ts";
import { PeriodicLoop } from "#shared/lifecycle/index.ts";
import { errorMessage, type Log } from "#shared/log/index.ts";
import { type NodeSpecInput, buildNode, nodeLabels, nodeStatus } from "./node-object.ts";
import { nodeStatusPatch, withHeartbeat } from "./status-patch.ts";

/** The slice of the Kubernetes client this controller calls. */
export type NodeKubeClient = Pick<KubeClient, "get" | "create" | "patch">;

/** virtual-kubelet's status cadence: frequent enough for `kubectl get nodes`, the Lease carries liveness. */
export const DEFAULT_STATUS_INTERVAL_MS = 60_000;
/** A 409 on a status patch means our view is stale: re-GET and retry this many times before waiting a tick. */
const CONFLICT_RETRIES = 3;

export interface NodeControllerOptions {
  client: NodeKubeClient;
  spec: NodeSpecInput;
  log: Log;
  clock?: Clock;
  statusIntervalMs?: number;
}

export interface NodeRef {
  name: string;
  uid: string;
}

export class NodeController {
  private readonly client: NodeKubeClient;
  private readonly spec: NodeSpecInput;
  private readonly log: Log;
  private readonly clock: Clock;
  private live: V1Node | undefined;
  /** When markReady ran: Ready's lastTransitionTime from then on. */
  private readySince: Date | undefined;
  private goneFlag = false;
  private resolveGone!: () => void;
  private readonly loop: PeriodicLoop;
  /** Serializes pushes: the readiness push and a loop tick must not compute patches from the same stale view. */
  private pushing: Promise<void> = Promise.resolve();
  /** Resolves when the Node is found deleted while running. */
  readonly whenGone: Promise<void>;

  constructor(opts: NodeControllerOptions) {
    this.client = opts.client;
    this.spec = opts.spec;
    this.log = opts.log;
    this.clock = opts.clock ?? realClock;
    this.loop = new PeriodicLoop({
      name: "node-status",
      clock: this.clock,
      intervalMs: opts.statusIntervalMs ?? DEFAULT_STATUS_INTERVAL_MS,
      tick: () => this.tick(),
    });
    this.whenGone = new Promise((r) => (this.resolveGone = r));
  }

  get name(): string {
    return this.spec.nodeName;
  }

  /** True once a write found the Node deleted; stays true until the process restarts. */
  get gone(): boolean {
    return this.goneFlag;
  }

  /** The registered Node's name and UID (for ownerReferences), or undefined before registration. */
  nodeRef(): NodeRef | undefined {
    const uid = this.live?.metadata?.uid;
    return uid ? { name: this.spec.nodeName, uid } : undefined;
  }

  /** The last Node object the apiserver returned. */
  get current(): V1Node | undefined {
    return this.live;
  }

  /**
   * GET the Node; NotFound → POST the full object; found → patch labels, annotations and status only (its spec,
   * taints included, is never changed: an operator's edits survive restarts). Throws on failure.
   */
  async ensure(): Promise<V1Node> {
    const name = this.spec.nodeName;
    let existing: V1Node | undefined;
    try {
      existing = await this.client.get<V1Node>(Nodes, name);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    if (!existing) {
      this.live = await this.client.create<V1Node>(Nodes, buildNode(this.spec, new Date(this.clock.now())));
      this.log.info({ node: name, uid: this.live.metadata?.uid }, "registered the virtual node");
      return this.live;
    }
    this.live = existing;
    this.log.info({ node: name, uid: existing.metadata?.uid }, "virtual node exists; updating its status only");
    await this.push();
    return this.live;
  }

  /** Starts the periodic status loop. Idempotent. */
  start(): void {
    this.loop.start();
  }

  /** Ready=True, KubeletReady, phase Running, pushed now rather than at the next tick. */
  async markReady(): Promise<void> {
    this.readySince ??= new Date(this.clock.now());
    await this.pushQuietly();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    await this.pushing;
  }

  /** One status round, an interval after the previous; ends the loop once the Node is gone. */
  private async tick(): Promise<boolean> {
    if (this.goneFlag) return true;
    await this.pushQuietly();
    return this.goneFlag;
  }

  /** One status push; errors are logged and the next tick retries. */
  private pushQuietly(): Promise<void> {
    const next = this.pushing.then(async () => {
      try {
        await this.push();
      } catch (e) {
        this.log.warn({ node: this.spec.nodeName, err: errorMessage(e) }, "node status patch failed; retrying next tick");
      }
    });
    this.pushing = next;
    return next;
  }

  private async push(): Promise<void> {
    if (this.goneFlag || !this.live) return;
    const name = this.spec.nodeName;
    for (let attempt = 0; ; attempt++) {
      const now = new Date(this.clock.now());
      const desired = {
        labels: nodeLabels(this.spec),
        status: withHeartbeat(nodeStatus(this.spec, this.readySince, now), now),
      };
      const patch = nodeStatusPatch(desired, this.live);
      try {
        this.live = await this.client.patch<V1Node>(Nodes, name, patch, { type: "strategic", subresource: "status" });
        return;
      } catch (e) {
        if (isNotFound(e)) return this.markGone();
        if (!isConflict(e) || attempt >= CONFLICT_RETRIES) throw e;
        try {
          this.live = await this.client.get<V1Node>(Nodes, name);
        } catch (ge) {
          if (isNotFound(ge)) return this.markGone();
          throw ge;
        }
      }
    }
  }

  private markGone(): void {
    if (this.goneFlag) return;
    this.goneFlag = true;
    this.log.warn({ node: this.spec.nodeName }, "the virtual node was deleted; not recreating it until restart");
    this.resolveGone();
  }
}
