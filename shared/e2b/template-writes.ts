// Read your own template writes (docs/e2b.md "Read your own writes"): the fleet snapshot lists a build's promoted
// template one poll tick or inventory publish after the build answered `ready`, and lists a deleted one as long.
// The SDK's Template.build is followed at once by Template.exists, a create from it or getTags, so this replica lays
// its own recent promotes and deletes over the snapshot that every reader of built templates sees (NodeAccess.nodes).
// A write is dropped as soon as the snapshot agrees with it, and after OWN_WRITE_MS in any case (by then the
// snapshot's word is the truth: another replica may have changed the template since).
import type { Clock } from "../clock/index.ts";
import type { FleetNode, FleetTemplate } from "../fleet/index.ts";
import { OWN_WRITE_MS } from "./own-writes.ts";

/** Bound on remembered writes (a build burst; a build promotes one template): the oldest go first. */
export const TEMPLATE_WRITES_MAX = 1_000;

/** A holder of a template on a node: the node's sandboxd address and the template's key and digest. */
export interface TemplateHolder {
  address: string;
  template: Pick<FleetTemplate, "template" | "net" | "size" | "contentDigest">;
}

interface Write {
  address: string;
  added?: FleetTemplate;
  removed?: TemplateHolder["template"];
  until: number;
}

const sameKey = (a: TemplateHolder["template"], b: TemplateHolder["template"]) =>
  a.template === b.template && a.net === b.net && a.size === b.size && (a.contentDigest === undefined || b.contentDigest === undefined || a.contentDigest === b.contentDigest);

export class TemplateWrites {
  private writes: Write[] = [];
  /** The last overlay, valid for the same snapshot and writes until the first of its writes expires. */
  private memo: { input: readonly FleetNode[]; version: number; until: number; output: readonly FleetNode[] } | undefined;
  private version = 0;

  constructor(private readonly clock: Clock) {}

  /** A promote this replica published: `added` on the node at `address`, and the older holders it deleted. */
  published(address: string, added: FleetTemplate, deleted: readonly TemplateHolder[]): void {
    const until = this.clock.now() + OWN_WRITE_MS;
    // A promote supersedes what this replica remembered of the same holders.
    this.writes = this.writes.filter((w) => !deleted.some((d) => w.address === d.address && w.added && sameKey(w.added, d.template)));
    for (const d of deleted) this.push({ address: d.address, removed: d.template, until });
    this.push({ address, added, until });
  }

  /** Holders this replica deleted (DELETE /templates/{id}). */
  deleted(holders: readonly TemplateHolder[]): void {
    const until = this.clock.now() + OWN_WRITE_MS;
    this.writes = this.writes.filter((w) => !holders.some((h) => w.address === h.address && w.added && sameKey(w.added, h.template)));
    for (const h of holders) this.push({ address: h.address, removed: h.template, until });
  }

  /** The snapshot with this replica's template writes laid over it; the snapshot itself while there are none. */
  overlay(nodes: readonly FleetNode[]): readonly FleetNode[] {
    if (this.writes.length === 0) return nodes;
    const now = this.clock.now();
    if (this.memo && this.memo.input === nodes && this.memo.version === this.version && now < this.memo.until) return this.memo.output;
    const byAddress = new Map(nodes.map((n) => [n.address, n]));
    // Drop what expired, and what the snapshot already shows (the overlay would change nothing there any more).
    const live = this.writes.filter((w) => {
      if (w.until <= now) return false;
      const node = byAddress.get(w.address);
      if (!node) return true;
      if (w.added) return !node.templates.some((t) => sameKey(t, w.added!) && t.contentDigest === w.added!.contentDigest);
      return node.templates.some((t) => sameKey(t, w.removed!));
    });
    if (live.length !== this.writes.length) {
      this.writes = live;
      this.version++;
    }
    if (live.length === 0) return nodes;
    const output = nodes.map((node) => {
      const mine = live.filter((w) => w.address === node.address);
      if (mine.length === 0) return node;
      let templates = node.templates.filter((t) => !mine.some((w) => w.removed && sameKey(t, w.removed)));
      for (const w of mine) if (w.added) templates = [...templates.filter((t) => !sameKey(t, { ...w.added!, contentDigest: undefined })), w.added];
      return { ...node, templates };
    });
    this.memo = { input: nodes, version: this.version, until: Math.min(...live.map((w) => w.until)), output };
    return output;
  }

  private push(w: Write): void {
    this.writes.push(w);
    if (this.writes.length > TEMPLATE_WRITES_MAX) this.writes.splice(0, this.writes.length - TEMPLATE_WRITES_MAX);
    this.version++;
  }
}
