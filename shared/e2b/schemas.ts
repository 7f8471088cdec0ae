// Wire types of the e2b surface (names follow e2b's own OpenAPI spec). One zod schema per type: the routes
// validate requests with them and `/openapi.json` is generated from them (app.ts registers each route with its
// schemas), so what the document says is exactly what is accepted. The create, pause, connect, resume and snapshot
// bodies are strict: a field this server does not know is a 400 naming it (body.ts), never dropped silently; each
// field the newest SDKs send there is served or refused by name (refused-options.ts, lifecycle-options.ts).
import { z } from "@hono/zod-openapi";

export const ErrorSchema = z.object({ code: z.number().int(), message: z.string(), error_code: z.string().optional() }).openapi("Error");

const seconds = (what: string) => z.number().int().openapi({ description: `${what}, in seconds` });

export const NewSandbox = z
  .strictObject({
    templateID: z.string().openapi({ example: "base", description: "Alias, pool image, built template or snapshot id" }),
    timeout: seconds("Lease").optional(),
    metadata: z.record(z.string(), z.string()).optional(),
    envVars: z.record(z.string(), z.string()).optional(),
    allow_internet_access: z.boolean().optional(),
    autoPause: z.boolean().optional(),
    secure: z.boolean().optional(),
    // allowPublicTraffic: user ports without a token (shared/envd-token/traffic.ts); every other network field is
    // refused by name with the reason (refused-options.ts), so it is not typed here.
    network: z
      .object({ allowPublicTraffic: z.boolean().optional() })
      .catchall(z.unknown())
      .optional()
      .openapi({ description: "Only allowPublicTraffic is served; each other network field is a 400 naming it (the node's guarded-egress policy)" }),
    volumeMounts: z.array(z.unknown()).optional().openapi({ description: "Refused with a 400: the volume API is not offered" }),
    autoPauseMemory: z.boolean().optional(),
    autoResume: z.strictObject({ enabled: z.boolean().optional() }).optional(),
    mcp: z.unknown().optional().openapi({ description: "Refused with a 400: needs e2b's MCP gateway template" }),
    iam: z.unknown().optional().openapi({ description: "Refused with a 400: the node's guarded-egress policy" }),
  })
  .openapi("NewSandbox");
export type NewSandbox = z.infer<typeof NewSandbox>;

export const SandboxSchema = z
  .object({
    templateID: z.string(),
    sandboxID: z.string(),
    clientID: z.string(),
    envdVersion: z.string(),
    envdAccessToken: z.string(),
    /** Set when the sandbox's user ports are not public: send it as the e2b-traffic-access-token header. */
    trafficAccessToken: z.string().nullable().optional(),
    domain: z.string(),
    alias: z.string().optional(),
  })
  .openapi("Sandbox");
export type SandboxReply = z.infer<typeof SandboxSchema>;

export const SandboxState = z.enum(["running", "paused"]);

export const ListedSandbox = z
  .object({
    templateID: z.string(),
    alias: z.string().optional(),
    sandboxID: z.string(),
    clientID: z.string(),
    startedAt: z.string(),
    endAt: z.string(),
    state: SandboxState,
    envdVersion: z.string(),
    cpuCount: z.number().int(),
    memoryMB: z.number().int(),
    diskSizeMB: z.number().int(),
    metadata: z.record(z.string(), z.string()).optional(),
    domain: z.string(),
  })
  .openapi("ListedSandbox");
export type ListedSandbox = z.infer<typeof ListedSandbox>;
export const SandboxDetailSchema = ListedSandbox.openapi("SandboxDetail");

export const TimeoutBody = z.object({ timeout: seconds("New lease") }).openapi("SandboxTimeout");
export const RefreshBody = z.object({ duration: seconds("Lease").optional() }).openapi("SandboxRefresh");
export const PauseBody = z
  .strictObject({
    memory: z.boolean().optional(),
    requireHealthyGuest: z.boolean().optional().openapi({ description: "Refuse the pause (503, the sandbox keeps running) when the guest agent does not answer" }),
  })
  .openapi("SandboxPause");
export const ConnectBody = z.strictObject({ timeout: seconds("Lease").optional(), memory: z.boolean().optional() }).openapi("ConnectSandbox");
export const ResumeBody = z.strictObject({ timeout: seconds("Lease").optional(), memory: z.boolean().optional(), autoPause: z.boolean().optional() }).openapi("ResumedSandbox");
export const ForkBody = z.object({ timeout: seconds("Lease of each child").optional(), count: z.number().int().optional() }).openapi("SandboxFork");
export const ForkResult = z.object({ sandbox: SandboxSchema }).openapi("SandboxForkResult");
// `memory: false` (Python `create_snapshot(mode="filesystem")`) is refused with a 400 (lifecycle-options.ts).
export const SnapshotBody = z.strictObject({ name: z.string().optional(), memory: z.boolean().optional() }).openapi("NewSnapshot");
/** `PUT /sandboxes/{id}/network` (JS `Sandbox.updateNetwork`): every egress field is refused by name (refused-options.ts). */
export const NetworkUpdateBody = z
  .object({ allow_internet_access: z.boolean().optional() })
  .catchall(z.unknown())
  .openapi("SandboxNetworkUpdate");
export const SnapshotInfo = z.object({ snapshotID: z.string(), names: z.array(z.string()) }).openapi("SnapshotInfo");
export type SnapshotInfo = z.infer<typeof SnapshotInfo>;

export const SandboxMetric = z
  .object({
    timestamp: z.string(),
    timestampUnix: z.number().int(),
    cpuCount: z.number().int(),
    cpuUsedPct: z.number(),
    memUsed: z.number().int(),
    memTotal: z.number().int(),
    memCache: z.number().int(),
    diskUsed: z.number().int(),
    diskTotal: z.number().int(),
  })
  .openapi("SandboxMetric");
export type SandboxMetric = z.infer<typeof SandboxMetric>;
export const SandboxesWithMetrics = z.object({ sandboxes: z.record(z.string(), SandboxMetric) }).openapi("SandboxesWithMetrics");

/** What envd's `GET /metrics` answers (read through the passive relay). */
export const EnvdMetrics = z.object({
  ts: z.number().optional(),
  cpu_count: z.number().optional(),
  cpu_used_pct: z.number().optional(),
  mem_total: z.number().optional(),
  mem_used: z.number().optional(),
  mem_cache: z.number().optional(),
  disk_used: z.number().optional(),
  disk_total: z.number().optional(),
});

export const SandboxLogs = z.object({ logs: z.array(z.unknown()), logEntries: z.array(z.unknown()) }).openapi("SandboxLogs");
export const SandboxLogsV2 = z.object({ logs: z.array(z.unknown()) }).openapi("SandboxLogsV2");

export const TemplateSchema = z
  .object({
    templateID: z.string(),
    buildID: z.string(),
    cpuCount: z.number().int(),
    memoryMB: z.number().int(),
    diskSizeMB: z.number().int(),
    public: z.boolean(),
    aliases: z.array(z.string()),
    names: z.array(z.string()),
    createdAt: z.string(),
    updatedAt: z.string(),
    createdBy: z.null(),
    lastSpawnedAt: z.null(),
    spawnCount: z.number().int(),
    buildCount: z.number().int(),
    envdVersion: z.string(),
    buildStatus: z.literal("ready"),
  })
  .openapi("Template");
export type TemplateReply = z.infer<typeof TemplateSchema>;
export const TemplateBuild = z
  .object({
    buildID: z.string(),
    status: z.literal("ready"),
    createdAt: z.string(),
    updatedAt: z.string(),
    finishedAt: z.string(),
    cpuCount: z.number().int(),
    memoryMB: z.number().int(),
    envdVersion: z.string(),
  })
  .openapi("TemplateBuild");
export const TemplateWithBuilds = z
  .object({
    templateID: z.string(),
    public: z.boolean(),
    aliases: z.array(z.string()),
    names: z.array(z.string()),
    createdAt: z.string(),
    updatedAt: z.string(),
    lastSpawnedAt: z.null(),
    spawnCount: z.number().int(),
    builds: z.array(TemplateBuild),
  })
  .openapi("TemplateWithBuilds");
export const TemplateUpdate = z.object({ public: z.boolean().optional() }).openapi("TemplateUpdate");
export const TemplateUpdateReply = z.object({ names: z.array(z.string()) }).openapi("TemplateUpdateResponse");
export const AssignTagsBody = z.object({ target: z.string(), tags: z.array(z.string()) }).openapi("AssignTemplateTagsRequest");
export const AssignTagsReply = z.object({ tags: z.array(z.string()), buildID: z.string() }).openapi("AssignedTemplateTags");
export const RemoveTagsBody = z.object({ name: z.string(), tags: z.array(z.string()) }).openapi("DeleteTemplateTagsRequest");
export const TemplateTag = z.object({ tag: z.string(), buildID: z.string(), createdAt: z.string() }).openapi("TemplateTag");
export const TemplateAliasResponse = z.object({ templateID: z.string(), public: z.boolean() }).openapi("TemplateAliasResponse");

// Query strings (validated by the same helper as bodies).
const csv = z.union([z.string(), z.array(z.string())]).optional();
export const ListQuery = z
  .object({
    state: csv.openapi({ description: "running and/or paused; repeated or comma-joined" }),
    template: z.string().optional(),
    startedAfter: z.string().optional().openapi({ description: "RFC 3339" }),
    metadata: z.string().optional().openapi({ description: "k=v pairs joined by & (URL-encoded as the SDK does)" }),
    limit: z.string().optional().openapi({ description: "1-100 (default 100)" }),
    order: z.string().optional().openapi({ description: "desc (default) or asc" }),
    nextToken: z.string().optional(),
  })
  .openapi("ListSandboxesQuery");
export type ListQuery = z.infer<typeof ListQuery>;

export const SnapshotsQuery = z.object({
  sandboxID: z.string().optional(),
  name: z.string().optional(),
  limit: z.string().optional(),
  nextToken: z.string().optional(),
});
export const MetricsQuery = z.object({ sandbox_ids: z.string().optional() });
export const IdParam = z.object({ sandboxID: z.string() });
export const TemplateParam = z.object({ templateID: z.string() });
export const AliasParam = z.object({ alias: z.string() });
/** The create's optional `Idempotency-Key` header (docs/e2b.md "Idempotent create"). */
export const IdempotencyHeader = z.object({
  "idempotency-key": z.string().optional().openapi({ description: "1-255 of [a-z0-9-]: a retry within 10 minutes returns the same sandbox" }),
});
