// Templates of the e2b surface (docs/e2b.md "Templates"): pool images as the fleet advertises them, and built
// templates (promoted as `e2b/<ns>/<name>`, never addressable by that name) with their builds and tags. Tags are
// sandboxd template labels `{tag: contentDigest}` on every holder.
import { createHash } from "node:crypto";
import { FANOUT_CONCURRENCY, advertisesImage, mapLimit } from "../fleet/index.ts";
import { SIZE_TIERS, metadataProblem } from "../sandboxd/index.ts";
import { E2bError, badRequest, templateNotFound } from "./errors.ts";
import type { NodeAccess } from "./nodes.ts";
import { BUILT_PREFIX, NAME_BUDGET, wireTime } from "./render.ts";
import type { AliasTarget } from "./files.ts";

/** A tag is a node label key (printable ASCII, 1-128 bytes, no `=` or `&`) and never holds `:` (target syntax). */
const TAG_RE = /^[\x21-\x7e]{1,128}$/;

function checkTags(tags: string[]): void {
  if (tags.length === 0) throw badRequest("tags: give at least one non-empty tag");
  for (const t of tags) {
    if (t.trim() === "") throw badRequest("tags: give at least one non-empty tag");
    if (!TAG_RE.test(t) || /[=&:]/.test(t)) throw badRequest(`tags: invalid tag ${JSON.stringify(t.slice(0, 140))}: 1-128 printable ASCII characters without spaces, '=', '&' or ':'`);
  }
}

export class TemplateCatalog {
  constructor(
    private readonly nodes: NodeAccess,
    private readonly aliases: ReadonlyMap<string, AliasTarget>,
    /** image -> its aliases, sorted. */
    private readonly imageAliases: ReadonlyMap<string, string[]>,
    private readonly envdVersion: string,
  ) {}

  /** Nodes holding the namespace's built template `name` (promoted as `e2b/<ns>/<name>`), with its key there. */
  builtHolders(ns: string, name: string) {
    const ref = `${BUILT_PREFIX}${ns}/${name}`;
    return this.nodes.nodes().flatMap((node) => node.templates.filter((t) => t.template === ref && node.address).map((t) => ({ node, t })));
  }

  /**
   * The holders a create naming `name` or `name:tag` claims from (docs/e2b.md "Built templates as create targets"):
   * every holder of the name, or, with a tag, the holders whose digest the tag's label points at.
   */
  createHolders(ns: string, target: string) {
    const colon = target.lastIndexOf(":");
    if (colon <= 0) return this.builtHolders(ns, target);
    const tag = target.slice(colon + 1);
    const holders = this.builtHolders(ns, target.slice(0, colon));
    if (tag === "default") return holders;
    return holders.filter(({ t }) => t.contentDigest !== undefined && t.labels?.[tag] === t.contentDigest);
  }

  /** `GET /templates/aliases/{alias}`. */
  templateAlias(ns: string, alias: string): { templateID: string; public: boolean } {
    const a = this.aliases.get(alias);
    if (a) return { templateID: a.image, public: true };
    const nodes = this.nodes.nodes();
    const built = `${BUILT_PREFIX}${ns}/${alias}`;
    if (advertisesImage(nodes, alias) || nodes.some((n) => n.templates.some((t) => t.template === built))) return { templateID: alias, public: true };
    throw new E2bError(404, `template alias "${alias}" not found`);
  }

  /** Distinct advertised pool images, then the namespace's built templates. */
  templates(ns: string) {
    const nodes = this.nodes.nodes();
    const images = [...new Set(nodes.flatMap((n) => n.pools.map((p) => p.template)))].sort();
    const base = {
      cpuCount: 0,
      memoryMB: 0,
      diskSizeMB: 0,
      public: true,
      createdBy: null,
      lastSpawnedAt: null,
      spawnCount: 0,
      envdVersion: this.envdVersion,
      buildStatus: "ready" as const,
    };
    const out = images.map((image) => ({
      ...base,
      templateID: image,
      buildID: image,
      aliases: this.imageAliases.get(image) ?? [],
      names: [image],
      createdAt: "",
      updatedAt: "",
      buildCount: 1,
    }));
    const prefix = `${BUILT_PREFIX}${ns}/`;
    const built = new Map<string, { digests: Set<string>; newest: number }>();
    for (const n of nodes) {
      for (const t of n.templates) {
        // `_c-…` are the build step cache's entries (builds/cache.ts), not templates.
        if (!t.template.startsWith(prefix) || t.template.startsWith(`${prefix}_`)) continue;
        const rec = built.get(t.template) ?? { digests: new Set<string>(), newest: 0 };
        if (t.contentDigest) rec.digests.add(t.contentDigest);
        rec.newest = Math.max(rec.newest, t.createdAt ?? 0);
        built.set(t.template, rec);
      }
    }
    for (const [template, rec] of [...built].sort()) {
      const name = template.slice(prefix.length);
      const when = rec.newest ? wireTime(rec.newest) : "";
      out.push({ ...base, templateID: name, buildID: buildIdOf([...rec.digests][0] ?? name), aliases: [name], names: [name], createdAt: when, updatedAt: when, buildCount: rec.digests.size });
    }
    return out;
  }

  /** `GET /templates/{id}`: a built template's builds (one per content digest); pool images are 404 with a reason. */
  templateDetail(ns: string, id: string) {
    if (`${BUILT_PREFIX}${ns}/${id}`.length > NAME_BUDGET) throw badRequest(`template name "${id}": at most ${NAME_BUDGET - BUILT_PREFIX.length - ns.length - 1} characters in namespace "${ns}"`);
    const holders = this.builtHolders(ns, id);
    if (holders.length === 0) {
      if (advertisesImage(this.nodes.nodes(), id)) throw new E2bError(404, `template "${id}" is a pool image, not a built template`);
      throw templateNotFound(id);
    }
    const byDigest = new Map<string, { createdAt: number; size: string }>();
    for (const { t } of holders) {
      const digest = t.contentDigest ?? "";
      const prev = byDigest.get(digest);
      if (!prev || (t.createdAt ?? 0) > prev.createdAt) byDigest.set(digest, { createdAt: t.createdAt ?? 0, size: t.size });
    }
    const builds = [...byDigest].sort((a, b) => b[1].createdAt - a[1].createdAt);
    const newest = builds[0]![1].createdAt;
    const tier = SIZE_TIERS[builds[0]![1].size as keyof typeof SIZE_TIERS];
    return {
      templateID: id,
      public: true,
      aliases: [id],
      names: [id],
      createdAt: wireTime(Math.min(...builds.map((b) => b[1].createdAt))),
      updatedAt: wireTime(newest),
      lastSpawnedAt: null,
      spawnCount: 0,
      builds: builds.map(([digest, b]) => ({
        buildID: buildIdOf(digest),
        status: "ready",
        createdAt: wireTime(b.createdAt),
        updatedAt: wireTime(b.createdAt),
        finishedAt: wireTime(b.createdAt),
        cpuCount: tier?.cpu_count ?? 0,
        memoryMB: Math.floor((tier?.mem_total_bytes ?? 0) / 1024 / 1024),
        envdVersion: this.envdVersion,
      })),
    };
  }

  // ------------------------------------------------------------------------------------------------------------
  // Tags of built templates: sandboxd template labels `{tag: contentDigest}` on every holder

  /** The holders of a built template, its current (newest) digest, and the labels a current holder reports live. */
  private async tagState(ns: string, name: string) {
    const holders = this.builtHolders(ns, name);
    if (holders.length === 0) throw templateNotFound(name);
    const current = [...holders].sort((a, b) => (b.t.createdAt ?? 0) - (a.t.createdAt ?? 0))[0]!;
    const digest = current.t.contentDigest ?? "";
    // Read the labels live from a current holder: the snapshot may lag a tag written a moment ago.
    let labels: Record<string, string> = { ...(current.t.labels ?? {}) };
    try {
      const info = await this.nodes.client(current.node.address).info();
      const live = info.templates.find((t) => t.key.template === current.t.template && t.content_digest === digest);
      if (live) labels = { ...(live.labels ?? {}) };
    } catch {
      // the snapshot's labels are the best we have
    }
    return { holders, digest, labels };
  }

  private async writeLabels(holders: ReturnType<TemplateCatalog["builtHolders"]>, labels: Record<string, string>): Promise<void> {
    const results = await mapLimit(holders, FANOUT_CONCURRENCY, ({ node, t }) =>
      this.nodes.client(node.address).putTemplateLabels({ template: t.template, net: t.net, size: t.size }, labels),
    );
    // This replica's next create by `name:tag` sees the tags it wrote, before the fleet view does.
    holders.forEach(({ node, t }, i) => {
      if (!(results[i] instanceof Error)) this.nodes.templateWrites.published(node.address, { ...t, labels });
    });
    if (results.some((r) => r instanceof Error)) throw new E2bError(500, "failed to write the template tags");
    this.nodes.fleet.changed?.();
  }

  /** `POST /templates/tags {target: "name" | "name:tag", tags}` -> 201 `{tags, buildID}`. */
  async assignTags(ns: string, target: string, tags: string[]): Promise<{ tags: string[]; buildID: string }> {
    checkTags(tags);
    const colon = target.lastIndexOf(":");
    const name = colon > 0 ? target.slice(0, colon) : target;
    const fromTag = colon > 0 ? target.slice(colon + 1) : "default";
    const { holders, digest: current, labels } = await this.tagState(ns, name);
    let digest = current;
    if (fromTag !== "default") {
      const tagged = labels[fromTag];
      if (!tagged || !holders.some(({ t }) => t.contentDigest === tagged)) throw new E2bError(404, `tag "${fromTag}" of template "${name}" not found`);
      digest = tagged;
    }
    const next = { ...labels };
    for (const tag of tags) next[tag] = digest;
    // Tags are node template labels: the node's limits (16 pairs, 4 KiB) answered 500 before.
    const problem = metadataProblem(next);
    if (problem) throw badRequest(`tags: the template would carry too many tags (${problem.replace(/^metadata: /, "")})`);
    await this.writeLabels(holders, next);
    return { tags, buildID: buildIdOf(digest) };
  }

  /** `DELETE /templates/tags {name, tags}` -> 204. */
  async removeTags(ns: string, name: string, tags: string[]): Promise<void> {
    checkTags(tags);
    const { holders, labels } = await this.tagState(ns, name);
    const next = { ...labels };
    for (const tag of tags) delete next[tag];
    await this.writeLabels(holders, next);
  }

  /** `GET /templates/{id}/tags`: tags whose digest some holder still reports. */
  async templateTags(ns: string, name: string): Promise<{ tag: string; buildID: string; createdAt: string }[]> {
    const { holders, labels } = await this.tagState(ns, name);
    const created = new Map<string, number>();
    for (const { t } of holders) if (t.contentDigest) created.set(t.contentDigest, Math.max(created.get(t.contentDigest) ?? 0, t.createdAt ?? 0));
    return Object.entries(labels)
      .filter(([, digest]) => created.has(digest))
      .map(([tag, digest]) => ({ tag, buildID: buildIdOf(digest), createdAt: wireTime(created.get(digest)!) }))
      .sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
  }
}

/** UUIDv5 (RFC 9562) of `name` in namespace `ns` (both as bytes/strings): identical across replicas. */
function uuidV5(ns: Uint8Array, name: string): string {
  const h = createHash("sha1").update(ns).update(name).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const hex = h.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
const uuidBytes = (u: string) => Buffer.from(u.replace(/-/g, ""), "hex");
/** The URL namespace of RFC 9562, then the surface's own namespace under it. */
const BUILD_ID_NAMESPACE = uuidBytes(uuidV5(uuidBytes("6ba7b811-9dad-11d1-80b4-00c04fd430c8"), "https://github.com/cocoonstack/sandbox-operator/e2b"));

/** A built template's buildID: UUIDv5 of its content digest (the same on every replica). */
export function buildIdOf(digest: string): string {
  return uuidV5(BUILD_ID_NAMESPACE, digest);
}
