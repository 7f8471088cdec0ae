// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Reads (sandboxd.md §5.1–5.2): the live index with its filters, one row by id (with `token` for the configured
// root token), stats, owner. A released claim is gone from the index at once; an expired one stays (past
// deadline) until the next reap tick.
import type { Hono } from "hono";
import { sandboxScoped } from "../auth.ts";
import { badRequest } from "../errors.ts";
import { memUsedBytes, toRow } from "../claims.ts";
import type { SimNode } from "../node.ts";
import { SIZE_TIERS, toWireTime, type SandboxDetail, type Stats } from "#shared/sandboxd/index.ts";
import { bearer, json, type SimEnv } from "./body.ts";

/** `metadata=k=v` pairs: 400 for a pair without `=`, an empty key or a repeated key. */
function metadataFilter(values: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const pair of values) {
    const i = pair.indexOf("=");
    if (i < 0) throw badRequest(`invalid metadata filter ${JSON.stringify(pair)}: expected k=v`);
    const k = pair.slice(0, i);
    if (k === "") throw badRequest(`invalid metadata filter ${JSON.stringify(pair)}: empty key`);
    if (out.has(k)) throw badRequest(`invalid metadata filter: repeated key ${JSON.stringify(k)}`);
    out.set(k, pair.slice(i + 1));
  }
  return out;
}

export function registerReads(app: Hono<SimEnv>, node: SimNode): void {
  app.get("/v1/sandboxes", (c) => {
    const scope = node.legacyIndex ? node.tokens.rootOnly(bearer(c)) : node.tokens.nodeLevel(bearer(c));
    const claimRef = c.req.query("claim_ref") ?? "";
    const meta = metadataFilter(c.req.queries("metadata") ?? []);
    // `tenant=` is root only (removed tenants included); a tenant caller always sees only its own.
    const tenant = scope.kind === "tenant" ? scope.tenant : c.req.query("tenant") || undefined;
    const rows = node.table
      .all()
      .filter((x) => (tenant === undefined ? true : x.tenant === tenant))
      .filter((x) => claimRef === "" || x.claimRef === claimRef)
      .filter((x) => [...meta].every(([k, v]) => x.metadata?.[k] === v))
      .sort((a, b) => a.claimedAt - b.claimedAt || a.id.localeCompare(b.id))
      .map((x) => toRow(x, { legacy: node.legacyIndex, archivedDeadline: node.archivedDeadline }));
    return json(c, 200, { sandboxes: rows });
  });

  app.get("/v1/sandboxes/:id", (c) => {
    const b = bearer(c);
    node.tokens.rootOnly(b);
    const claim = node.mustGet(c.req.param("id"));
    const row: SandboxDetail = toRow(claim, { archivedDeadline: node.archivedDeadline });
    // Only for the configured root api_token; an open node never includes it.
    if (node.tokens.isRoot(b)) row.token = claim.token;
    return json(c, 200, row);
  });

  app.get("/v1/sandboxes/:id/stats", (c) => {
    node.tokens.rootOnly(bearer(c));
    const claim = node.mustGet(c.req.param("id"));
    const tier = SIZE_TIERS[claim.key.size];
    const running = claim.state === "running";
    const stats: Stats = {
      id: claim.id,
      cpu_count: tier.cpu_count,
      mem_total_bytes: tier.mem_total_bytes,
      // claims.ts memUsedBytes: a quarter of the allocation while running, 0 once the memory is written out.
      mem_used_bytes: memUsedBytes(claim),
      mem_used_measured: running,
      hibernated: claim.state === "hibernated",
      measured_at: toWireTime(node.clock.now()),
    };
    return json(c, 200, stats);
  });

  app.get("/v1/sandboxes/:id/owner", (c) => {
    // Own token only (no operator elevation); never stamps activity.
    sandboxScoped(node.tokens, bearer(c), node.table.get(c.req.param("id")), { operator: false, notFound: "not owned here" });
    return json(c, 200, { owner_addr: node.addr });
  });
}
