// Events live in the sandbox's namespace, and a sandbox's namespace need not exist in Kubernetes (an e2b key's
// namespace usually does not). A create there is a 404; this sink remembers such a namespace for a minute so its
// next events are skipped without a call (and without a warn line per claim), then tries again. The writes already
// queued in the recorder when the 404 came back are checked again here as each one leaves the queue, so a burst in
// a missing namespace makes one call, not one per queued event.
import type { Clock } from "#shared/clock/index.ts";
import { type EventSink, isNotFound } from "#shared/kube/index.ts";

export const MISSING_NAMESPACE_TTL_MS = 60_000;
const MAX_REMEMBERED = 4096;

/** A queued create refused without a call: its namespace answered 404 less than the TTL ago. */
export class NamespaceMissingError extends Error {
  override name = "NamespaceMissingError";
  constructor(readonly namespace: string) {
    super(`namespace "${namespace}" was not found by an earlier event create; skipped without a call`);
  }
}

export class NamespaceAwareSink implements EventSink {
  private readonly missing = new Map<string, number>();
  /** Creates refused here without a call (queued before their namespace was found missing). */
  readonly counts = { skipped: 0 };

  constructor(
    private readonly inner: EventSink,
    private readonly clock: Pick<Clock, "now">,
    private readonly ttlMs = MISSING_NAMESPACE_TTL_MS,
  ) {}

  /** Was a create in `namespace` refused as not found less than the TTL ago? */
  isMissing(namespace: string): boolean {
    const until = this.missing.get(namespace);
    if (until === undefined) return false;
    if (this.clock.now() < until) return true;
    this.missing.delete(namespace);
    return false;
  }

  async create(namespace: string, event: Parameters<EventSink["create"]>[1]): Promise<unknown> {
    if (this.isMissing(namespace)) {
      this.counts.skipped++;
      throw new NamespaceMissingError(namespace);
    }
    try {
      return await this.inner.create(namespace, event);
    } catch (err) {
      if (isNotFound(err)) {
        this.missing.set(namespace, this.clock.now() + this.ttlMs);
        while (this.missing.size > MAX_REMEMBERED) this.missing.delete(this.missing.keys().next().value!);
      }
      throw err;
    }
  }

  patch(namespace: string, name: string, patch: Parameters<EventSink["patch"]>[2]): Promise<unknown> {
    return this.inner.patch(namespace, name, patch);
  }
}
