// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Lifecycle verbs (sandboxd.md §4). release/renew/hibernate/wake take the sandbox-scoped guard with operator
// elevation (root token by id); fork/promote/checkpoint take the node-level guard on the header plus the
// body-token rule; instance-metadata is root-only.
import type { Hono } from "hono";
import { bodyTokenAccess, sandboxScoped } from "../auth.ts";
import { conflict, invalidBody, SimError } from "../errors.ts";
import { newLease } from "../claims.ts";
import { checkpoint, fork, promote, removedTenantCheck } from "../verbs.ts";
import type { SimNode } from "../node.ts";
import {
  CheckpointRequest,
  ForkRequest,
  INSTANCE_METADATA_MAX_BYTES,
  PromoteRequest,
  RenewRequest,
  toWireTime,
} from "#shared/sandboxd/index.ts";
import { bearer, decode, json, readJson, type SimContext, type SimEnv } from "./body.ts";

export function registerLifecycle(app: Hono<SimEnv>, node: SimNode): void {
  const scoped = (c: SimContext) => sandboxScoped(node.tokens, bearer(c), node.table.get(c.req.param("id")!), { operator: true });

  app.post("/v1/sandboxes/:id/release", (c) => {
    const { sandbox } = scoped(c);
    node.table.remove(sandbox.id);
    node.count("releases_total");
    return c.body(null, 204);
  });

  app.post("/v1/sandboxes/:id/renew", async (c) => {
    const { sandbox, operator } = scoped(c);
    const req = await decode(c, RenewRequest, { optional: true });
    removedTenantCheck(node, sandbox, operator);
    if (sandbox.state === "archived") throw conflict("sandbox archived");
    if (req.on_expire === "archive" && sandbox.key.net === "egress") throw conflict("on_expire archive is not supported on the egress lane");
    const lease = newLease(node.clock.now(), req.ttl_seconds);
    sandbox.grantedTtlSeconds = lease.granted;
    sandbox.deadline = lease.deadline;
    if (req.on_expire) {
      sandbox.onExpire = req.on_expire;
      sandbox.onExpireSet = true;
    }
    return json(c, 200, { deadline: toWireTime(lease.deadline) });
  });

  app.post("/v1/sandboxes/:id/hibernate", async (c) => {
    const { sandbox } = scoped(c);
    // A wake in flight (slowWake) finishes first: the verbs act in the order they arrived.
    if (node.waking(sandbox.id)) await node.wake(sandbox, { access: false });
    if (sandbox.key.net === "egress") throw conflict("cannot hibernate an egress-lane sandbox");
    if (sandbox.state === "archived") throw conflict("sandbox archived");
    if (sandbox.state === "failed") throw conflict("sandbox failed");
    if (sandbox.state === "running") {
      sandbox.state = "hibernated";
      node.count("hibernates_total");
    }
    return c.body(null, 204);
  });

  app.post("/v1/sandboxes/:id/wake", async (c) => {
    const { sandbox } = scoped(c);
    if (sandbox.state === "failed" && sandbox.key.net === "egress") throw conflict("cannot cold-boot a failed egress-lane sandbox");
    if (sandbox.state === "failed" && node.pools.fails(sandbox.key)) throw new SimError(500, "cold boot failed");
    // node.wake: counts the wake, takes the slowWake latency, shares a wake already in flight.
    await node.wake(sandbox, { access: false });
    return c.body(null, 204);
  });

  app.post("/v1/sandboxes/:id/fork", async (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    const req = await decode(c, ForkRequest);
    const { sandbox, operator } = bodyTokenAccess(scope, req.token, node.table.get(c.req.param("id")));
    return json(c, 200, fork(node, sandbox, operator, req));
  });

  app.post("/v1/sandboxes/:id/promote", async (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    const req = await decode(c, PromoteRequest);
    const { sandbox } = bodyTokenAccess(scope, req.token, node.table.get(c.req.param("id")));
    return json(c, 200, promote(node, sandbox, scope, req.template));
  });

  app.post("/v1/sandboxes/:id/checkpoint", async (c) => {
    const scope = node.tokens.nodeLevel(bearer(c));
    const req = await decode(c, CheckpointRequest, { optional: true });
    const { sandbox } = bodyTokenAccess(scope, req.token, node.table.get(c.req.param("id")));
    return json(c, 200, checkpoint(node, sandbox, scope, req.name));
  });

  app.put("/v1/sandboxes/:id/instance-metadata", async (c) => {
    node.tokens.rootOnly(bearer(c));
    const sandbox = node.mustGet(c.req.param("id"));
    const v = await readJson(c);
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw invalidBody("expected one JSON object");
    if (Buffer.byteLength(JSON.stringify(v)) > INSTANCE_METADATA_MAX_BYTES) throw invalidBody("instance metadata exceeds 4 KiB");
    if (sandbox.state === "hibernated" || sandbox.state === "archived") throw conflict("sandbox paused");
    sandbox.instanceMetadata = v as Record<string, unknown>;
    return c.body(null, 204);
  });
}
