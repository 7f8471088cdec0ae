// Snapshots of the e2b surface (docs/e2b.md "Snapshots"): sandboxd checkpoints stamped `<ns>/<name>`, found by a
// fan-out over every fresh node (checkpoints are not in the fleet view), listed newest first with an opaque
// nextToken, and deleted through `DELETE /templates/{id}` (a built template of the namespace first). Taking one is
// admitted by the namespace's snapshot quotas (quotas.ts: max-snapshots, snapshots-per-second).
import { FANOUT_CONCURRENCY, mapLimit } from "../fleet/index.ts";
import type { Checkpoint } from "../sandboxd/index.ts";
import { E2bError, badRequest, fromNode } from "./errors.ts";
import { sameSandboxId } from "./ids.ts";
import { parsePaging } from "./list.ts";
import type { NodeAccess } from "./nodes.ts";
import type { NamespaceQuotas } from "./quotas.ts";
import { BUILT_PREFIX, NAME_BUDGET } from "./render.ts";
import type { SnapshotInfo } from "./schemas.ts";

export class Snapshots {
  constructor(
    private readonly nodes: NodeAccess,
    private readonly quotas?: Pick<NamespaceQuotas, "admitSnapshot">,
  ) {}

  async createSnapshot(ns: string, id: string, name: string | undefined): Promise<SnapshotInfo> {
    const stamped = `${ns}/${name ?? ""}`;
    if (stamped.length > NAME_BUDGET) {
      throw badRequest(`snapshot name "${name}": at most ${NAME_BUDGET - ns.length - 1} characters in namespace "${ns}"`);
    }
    const loc = await this.nodes.locate(ns, id);
    // After the lookup (an unknown id is a 404, not a spent token), before the node is asked.
    const settle = (await this.quotas?.admitSnapshot(ns, async () => (await this.findCheckpoints(ns)).found.length)) ?? (() => undefined);
    let made = false;
    try {
      const checkpoint = await this.nodes.client(loc.address).checkpoint(loc.claimId, { name: stamped });
      made = true;
      return { snapshotID: checkpoint.id, names: name ? [name] : [] };
    } catch (err) {
      throw fromNode(err, id, "failed to snapshot the sandbox");
    } finally {
      settle(made);
    }
  }

  /** The namespace's checkpoints on every fresh node; `failed` counts nodes that did not answer. */
  async findCheckpoints(ns: string): Promise<{ found: { ck: Checkpoint; name: string; address: string }[]; failed: number }> {
    const prefix = `${ns}/`;
    const nodes = this.nodes.nodes().filter((n) => n.address);
    const lists = await mapLimit(nodes, FANOUT_CONCURRENCY, (n) => this.nodes.client(n.address).listCheckpoints());
    const found: { ck: Checkpoint; name: string; address: string }[] = [];
    let failed = 0;
    lists.forEach((l, i) => {
      if (l instanceof Error) {
        failed++;
        return;
      }
      for (const ck of l) {
        if (!ck.name?.startsWith(prefix)) continue;
        found.push({ ck, name: ck.name.slice(prefix.length), address: nodes[i]!.address });
      }
    });
    return { found, failed };
  }

  async listSnapshots(ns: string, q: { sandboxID?: string; name?: string; limit?: string; nextToken?: string }): Promise<{ items: SnapshotInfo[]; nextToken: string | undefined }> {
    const paging = parsePaging({ limit: q.limit, nextToken: undefined });
    const after = q.nextToken ? decodeSnapshotToken(q.nextToken) : undefined;
    const { found } = await this.findCheckpoints(ns);
    const rows = found
      .filter((f) => (q.sandboxID ? sameSandboxId(q.sandboxID, f.ck.sandbox_id) : true))
      .filter((f) => (q.name !== undefined && q.name !== "" ? f.name === q.name : true))
      .map((f) => ({ key: `${f.ck.created_at} ${f.ck.id}`, info: { snapshotID: f.ck.id, names: f.name ? [f.name] : [] } }))
      // Newest first, then id: stable across pages.
      .sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
    const rest = after ? rows.filter((r) => r.key < after) : rows;
    const out = rest.slice(0, paging.limit);
    const nextToken = rest.length > paging.limit ? Buffer.from(out[out.length - 1]!.key).toString("base64url") : undefined;
    return { items: out.map((r) => r.info), nextToken };
  }

  /** `DELETE /templates/{id}`: a built template of the namespace on every holder, else a snapshot id. */
  async deleteTemplate(ns: string, id: string): Promise<void> {
    const built = `${BUILT_PREFIX}${ns}/${id}`;
    const holders = this.nodes.nodes().flatMap((n) => n.templates.filter((t) => t.template === built).map((t) => ({ node: n, t })));
    if (holders.length > 0) {
      // Every digest of the name; what was deleted is gone for this replica's next read even if another holder
      // refused (the 500 below).
      const results = await this.nodes.deleteTemplates(holders.map(({ node, t }) => ({ address: node.address, template: t })), { byDigest: false });
      if (results.some((r) => r instanceof Error)) throw new E2bError(500, "failed to delete the template");
      this.nodes.fleet.changed?.();
      return;
    }
    const { found, failed } = await this.findCheckpoints(ns);
    const hit = found.find((f) => f.ck.id === id);
    if (!hit) {
      if (failed > 0) throw new E2bError(500, "failed to delete the snapshot: a node did not answer");
      throw new E2bError(404, "snapshot not found");
    }
    try {
      await this.nodes.client(hit.address).deleteCheckpoint(id);
    } catch {
      throw new E2bError(500, "failed to delete the snapshot");
    }
  }
}

function decodeSnapshotToken(token: string): string {
  const text = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, "base64url").toString("utf8") : "";
  if (!/^\S+ ck_[0-9a-f]+$/.test(text)) throw badRequest("invalid nextToken");
  return text;
}
