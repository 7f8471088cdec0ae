// The sandbox routes of the e2b app (docs/e2b.md "Routes"): create, list, one sandbox's reads and verbs, fork,
// snapshot, metrics and logs. Literal paths come before /sandboxes/{sandboxID}, which would otherwise match them.
import { createRoute, z } from "@hono/zod-openapi";
import { readJsonBody, readQuery } from "./body.ts";
import type { SandboxCreator } from "./create.ts";
import type { Forks } from "./fork.ts";
import { idempotencyKeyOf } from "./idempotency.ts";
import { snapshotRefusal } from "./lifecycle-options.ts";
import { errors, idParams, json, jsonBody, noContent, quotaErrors, sandboxIdOf as id, type RouteKit } from "./route-kit.ts";
import type { SandboxMetrics } from "./sandbox-metrics.ts";
import type { Sandboxes } from "./sandboxes.ts";
import * as S from "./schemas.ts";
import type { Snapshots } from "./snapshots.ts";

export interface SandboxRouteTargets {
  creator: Pick<SandboxCreator, "create">;
  sandboxes: Sandboxes;
  forks: Pick<Forks, "fork">;
  metrics: SandboxMetrics;
  snapshots: Pick<Snapshots, "createSnapshot">;
}

export function registerSandboxRoutes({ route }: RouteKit, t: SandboxRouteTargets): void {
  for (const path of ["/sandboxes", "/v2/sandboxes"]) {
    route(
      createRoute({ method: "post", path, request: { ...jsonBody(S.NewSandbox, true), headers: S.IdempotencyHeader }, responses: { 201: json(S.SandboxSchema, "Created"), 409: json(S.ErrorSchema, "Idempotency-Key reused with another body"), 503: json(S.ErrorSchema, "No warm capacity"), ...quotaErrors, ...errors } }),
      async (c, ns) => {
        const key = idempotencyKeyOf(c.req.header("idempotency-key"));
        return c.json(await t.creator.create(ns, await readJsonBody(c.req.raw, S.NewSandbox, true), key), 201);
      },
    );
  }

  route(
    createRoute({ method: "get", path: "/sandboxes/metrics", request: { query: S.MetricsQuery }, responses: { 200: json(S.SandboxesWithMetrics, "Metrics by id"), ...errors } }),
    async (c, ns) => c.json({ sandboxes: await t.metrics.metricsMany(ns, readQuery(c.req.raw, S.MetricsQuery).sandbox_ids) }),
  );
  route(
    createRoute({ method: "get", path: "/sandboxes", request: { query: S.ListQuery }, responses: { 200: json(z.array(S.ListedSandbox), "Every match"), ...errors } }),
    (c, ns) => c.json(t.sandboxes.list(ns, readQuery(c.req.raw, S.ListQuery), false).items),
  );
  route(
    createRoute({ method: "get", path: "/v2/sandboxes", request: { query: S.ListQuery }, responses: { 200: { ...json(z.array(S.ListedSandbox), "One page"), headers: z.object({ "X-Next-Token": z.string().optional() }) }, ...errors } }),
    (c, ns) => {
      const { items, nextToken } = t.sandboxes.list(ns, readQuery(c.req.raw, S.ListQuery), true);
      if (nextToken) c.header("X-Next-Token", nextToken);
      return c.json(items);
    },
  );

  route(createRoute({ method: "get", path: "/sandboxes/{sandboxID}", request: idParams, responses: { 200: json(S.SandboxDetailSchema, "Live state"), ...errors } }), async (c, ns) =>
    c.json(await t.sandboxes.get(ns, id(c))),
  );
  route(createRoute({ method: "delete", path: "/sandboxes/{sandboxID}", request: idParams, responses: { ...noContent("Killed"), ...errors } }), async (c, ns) => {
    await t.sandboxes.kill(ns, id(c));
    return c.body(null, 204);
  });
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/timeout", request: { ...idParams, ...jsonBody(S.TimeoutBody, true) }, responses: { ...noContent("Lease renewed"), 409: json(S.ErrorSchema, "Archived"), ...errors } }),
    async (c, ns) => {
      await t.sandboxes.setTimeout(ns, id(c), (await readJsonBody(c.req.raw, S.TimeoutBody, true)).timeout);
      return c.body(null, 204);
    },
  );
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/refreshes", request: { ...idParams, ...jsonBody(S.RefreshBody, false) }, responses: { ...noContent("Lease renewed"), ...errors } }),
    async (c, ns) => {
      await t.sandboxes.refresh(ns, id(c), (await readJsonBody(c.req.raw, S.RefreshBody, false)).duration);
      return c.body(null, 204);
    },
  );
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/pause", request: { ...idParams, ...jsonBody(S.PauseBody, false) }, responses: { ...noContent("Paused"), 409: json(S.ErrorSchema, "Already paused"), 503: json(S.ErrorSchema, "requireHealthyGuest and the guest agent does not answer: still running"), ...errors } }),
    async (c, ns) => {
      await t.sandboxes.pause(ns, id(c), await readJsonBody(c.req.raw, S.PauseBody, false));
      return c.body(null, 204);
    },
  );
  route(
    createRoute({ method: "put", path: "/sandboxes/{sandboxID}/network", request: { ...idParams, ...jsonBody(S.NetworkUpdateBody, true) }, responses: { ...noContent("Nothing to change"), ...errors } }),
    async (c, ns) => {
      await t.sandboxes.updateNetwork(ns, id(c), await readJsonBody(c.req.raw, S.NetworkUpdateBody, true));
      return c.body(null, 204);
    },
  );
  for (const path of ["/sandboxes/{sandboxID}/connect", "/v2/sandboxes/{sandboxID}/connect"]) {
    route(
      createRoute({ method: "post", path, request: { ...idParams, ...jsonBody(S.ConnectBody, false) }, responses: { 200: json(S.SandboxSchema, "Was running"), 201: json(S.SandboxSchema, "Resumed"), ...quotaErrors, ...errors } }),
      async (c, ns) => {
        const r = await t.sandboxes.connect(ns, id(c), await readJsonBody(c.req.raw, S.ConnectBody, false), "connect");
        return c.json(r.sandbox, r.status);
      },
    );
  }
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/resume", request: { ...idParams, ...jsonBody(S.ResumeBody, false) }, responses: { 201: json(S.SandboxSchema, "Resumed"), 409: json(S.ErrorSchema, "Already running"), ...quotaErrors, ...errors } }),
    async (c, ns) => {
      const r = await t.sandboxes.connect(ns, id(c), await readJsonBody(c.req.raw, S.ResumeBody, false), "resume");
      return c.json(r.sandbox, 201);
    },
  );
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/fork", request: { ...idParams, ...jsonBody(S.ForkBody, false) }, responses: { 201: json(z.array(S.ForkResult), "Children"), 409: json(S.ErrorSchema, "Parent paused"), ...quotaErrors, ...errors } }),
    async (c, ns) => {
      const children = await t.forks.fork(ns, id(c), await readJsonBody(c.req.raw, S.ForkBody, false));
      return c.json(
        children.map((sandbox) => ({ sandbox })),
        201,
      );
    },
  );
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/snapshots", request: { ...idParams, ...jsonBody(S.SnapshotBody, false) }, responses: { 201: json(S.SnapshotInfo, "Snapshot taken"), ...quotaErrors, ...errors } }),
    async (c, ns) => {
      const body = await readJsonBody(c.req.raw, S.SnapshotBody, false);
      const refused = snapshotRefusal(body.memory);
      if (refused) throw refused;
      return c.json(await t.snapshots.createSnapshot(ns, id(c), body.name), 201);
    },
  );
  route(createRoute({ method: "get", path: "/sandboxes/{sandboxID}/metrics", request: idParams, responses: { 200: json(z.array(S.SandboxMetric), "Metrics"), ...errors } }), async (c, ns) =>
    c.json(await t.metrics.metrics(ns, id(c))),
  );
  route(createRoute({ method: "get", path: "/sandboxes/{sandboxID}/logs", request: idParams, responses: { 200: json(S.SandboxLogs, "No log storage: empty"), ...errors } }), async (c, ns) => {
    await t.sandboxes.assertVisible(ns, id(c));
    return c.json({ logs: [], logEntries: [] });
  });
  route(createRoute({ method: "get", path: "/v2/sandboxes/{sandboxID}/logs", request: idParams, responses: { 200: json(S.SandboxLogsV2, "No log storage: empty"), ...errors } }), async (c, ns) => {
    await t.sandboxes.assertVisible(ns, id(c));
    return c.json({ logs: [] });
  });
}
