// Read your own template writes (docs/e2b.md "Read your own writes"): the fleet snapshot lists a build's promoted
// template one poll tick or inventory publish after the build answered `ready`, and lists a deleted one as long.
// The SDK's Template.build is followed at once by Template.exists, a create from it or getTags, so this replica lays
// its own recent promotes and deletes over the snapshot that every reader of built templates sees (NodeAccess.nodes).
// A write is dropped as soon as the snapshot agrees with it, as soon as the snapshot shows its node as seen at least
// TRUST_AFTER_MS after the write (then that snapshot is the truth, whatever it says: another replica may have
// rebuilt or deleted the template since), and after OWN_WRITE_MS in any case.
import type { Clock } from "../clock/index.ts";
import type { FleetNode, FleetTemplate } from "../fleet/index.ts";
import { isSandboxdError } from "../sandboxd/index.ts";
import { OWN_WRITE_MS } from "./own-writes.ts";

/**
 * Bound on remembered writes per namespace, its oldest first: a build writes its promote, the older holders it
 * deleted and its step-cache entries (at most 128 a namespace, builds/cache.ts).
 */
export const TEMPLATE_WRITES_PER_NAMESPACE = 256;
/** Bound on remembered writes in all. */
export const TEMPLATE_WRITES_MAX = 4_096;
/**
 * A node's snapshot stamped this long after a write saw the write (or what replaced it since): a mesh poll is
 * stamped when it ends, an inventory when its node published it, by that node's clock; the margin covers a slow poll
 * and some clock skew.
 */
export const TRUST_AFTER_MS = 5_000;

/** A holder of a template on a node: the node's sandboxd address and the template's key and digest. */
export interface TemplateHolder {
  address: string;
  template: Pick<FleetTemplate, "template" | "net" | "size" | "contentDigest">;
}

interface Write {
  address: string;
  /** The template ref's namespace (`e2b/<ns>/<name>`), for the per-namespace bound. */
  ns: string;
  added?: FleetTemplate;
  removed?: TemplateHolder["template"];
  at: number;
  until: number;
}

/** Whether a node's answer to a template delete means the holder is gone: done, or already absent (404, 412). */
export function goneAfterDelete(result: unknown): boolean {
  return !(result instanceof Error) || (isSandboxdError(result) && (result.status === 404 || result.status === 412));
}

type Key = TemplateHolder["template"];
const sameKeyAnyDigest = (a: Key, b: Key) => a.template === b.template && a.net === b.net && a.size === b.size;
/** Same key; same digest where both have one (an inventory may carry none). */
const sameKey = (a: Key, b: Key) => sameKeyAnyDigest(a, b) && (a.contentDigest === undefined || b.contentDigest === undefined || a.contentDigest === b.contentDigest);
function sameLabels(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const ka = Object.keys(a ?? {});
  if (ka.length !== Object.keys(b ?? {}).length) return false;
  return ka.every((k) => a![k] === b?.[k]);
}
const namespaceOf = (template: string) => template.split("/")[1] ?? "";

export class TemplateWrites {
  private writes: Write[] = [];
  /** The last overlay, valid for the same snapshot and writes until the first of its writes expires. */
  private memo: { input: readonly FleetNode[]; version: number; until: number; output: readonly FleetNode[] } | undefined;
  private version = 0;

  constructor(private readonly clock: Clock) {}

  /**
   * A template this replica promoted (a build, a step-cache entry) or relabelled (tags) on the node at `address`. It
   * replaces what this replica remembered of the same key on that node, whatever the digest (a rebuild whose first
   * promote the snapshot never showed). The holders a publish deleted are recorded by `deleted`, first.
   */
  published(address: string, added: FleetTemplate): void {
    const now = this.clock.now();
    this.writes = this.writes.filter((w) => !(w.added && w.address === address && sameKeyAnyDigest(w.added, added)));
    this.push({ address, ns: namespaceOf(added.template), added, at: now, until: now + OWN_WRITE_MS });
  }

  /** Holders this replica deleted (NodeAccess.deleteTemplates: a publish's older holders, cache prunes, DELETE /templates/{id}). */
  deleted(holders: readonly TemplateHolder[]): void {
    const now = this.clock.now();
    this.writes = this.writes.filter((w) => !holders.some((h) => w.address === h.address && w.added && sameKey(w.added, h.template)));
    for (const h of holders) this.push({ address: h.address, ns: namespaceOf(h.template.template), removed: h.template, at: now, until: now + OWN_WRITE_MS });
  }

  /** The snapshot with this replica's template writes laid over it; the snapshot itself while there are none. */
  overlay(nodes: readonly FleetNode[]): readonly FleetNode[] {
    if (this.writes.length === 0) return nodes;
    const now = this.clock.now();
    if (this.memo && this.memo.input === nodes && this.memo.version === this.version && now < this.memo.until) return this.memo.output;
    const byAddress = new Map(nodes.map((n) => [n.address, n]));
    // Drop what expired, what a later snapshot of its node has the word on, and what the snapshot already shows.
    const live = this.writes.filter((w) => {
      if (w.until <= now) return false;
      const node = byAddress.get(w.address);
      if (!node) return true;
      if (node.publishedAt !== undefined && node.publishedAt >= w.at + TRUST_AFTER_MS) return false;
      // Agreement includes the labels: a view polled between a promote and its label write lists it without them.
      if (w.added) return !node.templates.some((t) => sameKeyAnyDigest(t, w.added!) && t.contentDigest === w.added!.contentDigest && sameLabels(t.labels, w.added!.labels));
      return node.templates.some((t) => sameKey(t, w.removed!));
    });
    if (live.length !== this.writes.length) {
      this.writes = live;
      this.version++;
    }
    if (live.length === 0) return nodes;
    const perNode = new Map<string, Write[]>();
    for (const w of live) {
      const list = perNode.get(w.address);
      if (list) list.push(w);
      else perNode.set(w.address, [w]);
    }
    const output = nodes.map((node) => {
      const mine = perNode.get(node.address);
      if (!mine) return node;
      let templates = node.templates.filter((t) => !mine.some((w) => w.removed && sameKey(t, w.removed)));
      for (const w of mine) if (w.added) templates = [...templates.filter((t) => !sameKeyAnyDigest(t, w.added!)), w.added];
      return { ...node, templates };
    });
    this.memo = { input: nodes, version: this.version, until: Math.min(...live.map((w) => w.until)), output };
    return output;
  }

  private push(w: Write): void {
    this.writes.push(w);
    // One namespace's burst evicts its own oldest writes, never another namespace's.
    let inNs = 0;
    for (const x of this.writes) if (x.ns === w.ns) inNs++;
    if (inNs > TEMPLATE_WRITES_PER_NAMESPACE) this.writes.splice(this.writes.findIndex((x) => x.ns === w.ns), 1);
    if (this.writes.length > TEMPLATE_WRITES_MAX) this.writes.splice(0, this.writes.length - TEMPLATE_WRITES_MAX);
    this.version++;
  }
}
