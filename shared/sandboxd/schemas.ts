// The sandboxd wire contract (sandboxd §1–§6; docs/spec-sections.md): one zod schema per wire type, types via z.infer.
// The typed client, the simulator (services/sandboxd-sim) and the tests all parse through these; never write a
// hand-made twin of a wire type elsewhere.
//
// Decoding policy: replies are parsed leniently (unknown members are stripped, so a newer node never breaks an
// older client). Requests follow the node: claim-style bodies ignore unknown top-level fields, `PUT /v1/pools` is
// strict (unknown field -> 400).
import { z } from "zod";

// Formats (§1). Id, token and name formats live in ids.ts and are re-exported here, so one import serves every user.
export * from "./ids.ts";

// Wire times (§1) live in wire-time.ts.
export * from "./wire-time.ts";
import { WireTime } from "./wire-time.ts";

// ---------------------------------------------------------------------------------------------------------------
// Pool keys and size tiers (§1)

export const NETS = ["none", "egress"] as const;
export const Net = z.enum(NETS);
export type Net = z.infer<typeof Net>;

export const SIZES = ["small", "medium", "large", "xlarge", "2xlarge"] as const;
export const Size = z.enum(SIZES);
export type Size = z.infer<typeof Size>;

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
/** Size tier -> allocation, reported as a row's `cpu_count` / `mem_total_bytes`. */
export const SIZE_TIERS: Readonly<Record<Size, { cpu_count: number; mem_total_bytes: number }>> = {
  small: { cpu_count: 1, mem_total_bytes: 512 * MiB },
  medium: { cpu_count: 2, mem_total_bytes: 1 * GiB },
  large: { cpu_count: 4, mem_total_bytes: 4 * GiB },
  xlarge: { cpu_count: 4, mem_total_bytes: 8 * GiB },
  "2xlarge": { cpu_count: 8, mem_total_bytes: 16 * GiB },
};

export const DEFAULT_NET: Net = "none";
export const DEFAULT_SIZE: Size = "small";

/** An emitted key object: always carries all three members. */
export const PoolKey = z.object({
  template: z.string().min(1),
  net: Net,
  size: Size,
});
export type PoolKey = z.infer<typeof PoolKey>;

/** `template/net/size`, a stable map key (a template ref may contain `/` and `:`, never a NUL). */
export function poolKeyString(k: PoolKey): string {
  return `${k.template}\u0000${k.net}\u0000${k.size}`;
}

// ---------------------------------------------------------------------------------------------------------------
// Lease rules (§3.1, §6)

export const DEFAULT_TTL_SECONDS = 300;
export const MAX_TTL_SECONDS = 86_400;
export const DEFAULT_MAX_FORK_COUNT = 16;
/** Request bodies above this are `400 invalid request body`. */
export const MAX_REQUEST_BODY_BYTES = 1024 * 1024;

/** The TTL a node grants for a requested `ttl_seconds` (≤0 -> 300 s, >86400 -> 86400 s). */
export function grantedTtlSeconds(requested: number | undefined): number {
  if (requested === undefined || requested <= 0) return DEFAULT_TTL_SECONDS;
  return Math.min(requested, MAX_TTL_SECONDS);
}

export const OnExpire = z.enum(["destroy", "archive"]);
export type OnExpire = z.infer<typeof OnExpire>;

export const NetRoute = z.enum(["relay", "direct", "none"]);
export type NetRoute = z.infer<typeof NetRoute>;

/**
 * The route a claim on this lane usually gets, for a reply that does not say: `relay` on the egress lane (its
 * traffic leaves through the node's relay), `none` otherwise (a `net=none` guest has no NIC; the ports relay is
 * the only way in). An inference, used where the node gave no `net_route` (older nodes, adopted claims).
 */
export function inferNetRoute(net: Net): NetRoute {
  return net === "egress" ? "relay" : "none";
}

// Metadata, labels and env maps (§3.1) live in metadata.ts.
export * from "./metadata.ts";
import { EnvMap, Metadata } from "./metadata.ts";

export const VolumeMount = z.object({
  name: z.string(),
  mount: z.string(),
  mode: z.string().optional(),
});
export type VolumeMount = z.infer<typeof VolumeMount>;

// ---------------------------------------------------------------------------------------------------------------
// Claiming (§3)

/** `POST /v1/claim`. Lenient: unknown top-level fields are ignored (stripped). */
export const ClaimRequest = z.object({
  template: z.string().min(1, "template is required"),
  net: Net.optional(),
  size: Size.optional(),
  ttl_seconds: z.number().int().optional(),
  claim_ref: z.string().optional(),
  metadata: Metadata.optional(),
  on_expire: OnExpire.optional(),
  no_redirect: z.boolean().optional(),
  require_promoted: z.boolean().optional(),
  egress: z.boolean().optional(),
  env: EnvMap.optional(),
  volumes: z.array(z.unknown()).optional(),
  volumes_attach_only: z.boolean().optional(),
});
export type ClaimRequest = z.infer<typeof ClaimRequest>;
/** The members of a claim body that make up the pool key: a failure there is `invalid pool key: …`. */
export const POOL_KEY_FIELDS = ["template", "net", "size"] as const;

/**
 * A claim (and each fork child). `net_route` is optional: nodes that predate it omit the member, and such a reply
 * is an ordinary claim (a required member would fail the schema and send a delivered claim down the
 * lost-reply reconcile path). It is left absent rather than defaulted, because the reply does not name the key;
 * a caller that needs a value uses `inferNetRoute(request.net)`.
 */
export const ClaimReply = z.object({
  id: z.string(),
  token: z.string(),
  deadline: WireTime,
  owner_addr: z.string(),
  net_route: NetRoute.optional(),
  template_digest: z.string().optional(),
  from_checkpoint: z.string().optional(),
  volumes: z.array(VolumeMount).optional(),
});
export type ClaimReply = z.infer<typeof ClaimReply>;

/** A 200 that hands out nothing: retry at each target with `no_redirect:true` (and `require_promoted` if set). */
export const RedirectReply = z.object({
  redirect: z.array(z.string()),
  require_promoted: z.boolean().optional(),
});
export type RedirectReply = z.infer<typeof RedirectReply>;

/** A claim-style 200: either a claim or a redirect, never both. */
export const ClaimResponse = z.union([ClaimReply, RedirectReply]);
export type ClaimResponse = z.infer<typeof ClaimResponse>;
export function isRedirect(r: ClaimResponse): r is RedirectReply {
  return "redirect" in r;
}

/** `POST /v1/checkpoints/{id}/claim`. Lenient like a claim; the checkpoint's key applies. */
export const CheckpointClaimRequest = z.object({
  ttl_seconds: z.number().int().optional(),
  no_redirect: z.boolean().optional(),
  metadata: Metadata.optional(),
  on_expire: OnExpire.optional(),
  env: EnvMap.optional(),
  claim_ref: z.string().optional(),
});
export type CheckpointClaimRequest = z.infer<typeof CheckpointClaimRequest>;

/** Every handled error: `{"error":"<message>"}`. */
export const ErrorBody = z.object({ error: z.string() });
export type ErrorBody = z.infer<typeof ErrorBody>;

// ---------------------------------------------------------------------------------------------------------------
// Reads (§5.1–5.3)

/**
 * One row of `GET /v1/sandboxes`. Omission rules: `tenant` absent for root's claims; `archived` only when true;
 * `from_checkpoint`, `claim_ref`, `metadata`, `on_expire` when set; `restarts`, `restarted_at`, `failed` when
 * non-zero. `deadline` is optional only because an archived-forever claim may omit it (§9.3; it may also be
 * {@link GO_ZERO_TIME}); `cpu_count`/`mem_total_bytes` are optional because older nodes lack them (§9.1).
 * Never present: tokens.
 */
export const SandboxRow = z.object({
  id: z.string(),
  key: PoolKey,
  deadline: WireTime.optional(),
  hibernated: z.boolean(),
  cpu_count: z.number().int().optional(),
  mem_total_bytes: z.number().int().optional(),
  tenant: z.string().optional(),
  claimed_at: WireTime.optional(),
  archived: z.boolean().optional(),
  from_checkpoint: z.string().optional(),
  claim_ref: z.string().optional(),
  metadata: z.record(z.string(), z.string()).optional(),
  on_expire: OnExpire.optional(),
  volumes: z.array(VolumeMount).optional(),
  restarts: z.number().int().optional(),
  restarted_at: WireTime.optional(),
  failed: z.string().optional(),
});
export type SandboxRow = z.infer<typeof SandboxRow>;

export const ListReply = z.object({ sandboxes: z.array(SandboxRow) });
export type ListReply = z.infer<typeof ListReply>;

/** `GET /v1/sandboxes/{id}`: a row, plus `token` when the caller presented the configured root token. */
export const SandboxDetail = SandboxRow.extend({ token: z.string().optional() });
export type SandboxDetail = z.infer<typeof SandboxDetail>;

export const Stats = z.object({
  id: z.string(),
  cpu_count: z.number().int(),
  mem_total_bytes: z.number().int(),
  mem_used_bytes: z.number().int(),
  mem_used_measured: z.boolean(),
  hibernated: z.boolean(),
  measured_at: WireTime,
});
export type Stats = z.infer<typeof Stats>;

export const OwnerReply = z.object({ owner_addr: z.string() });
export type OwnerReply = z.infer<typeof OwnerReply>;

export const PoolStatus = z.object({
  key: PoolKey,
  warm: z.number().int(),
  refilling: z.number().int(),
  target: z.number().int(),
  golden: z.boolean(),
});
export type PoolStatus = z.infer<typeof PoolStatus>;

export const TemplateInfo = z.object({
  key: PoolKey,
  content_digest: z.string(),
  tenant: z.string().optional(),
  created_at: WireTime,
  cpu_count: z.number().int(),
  mem_total_bytes: z.number().int(),
  labels: z.record(z.string(), z.string()).optional(),
});
export type TemplateInfo = z.infer<typeof TemplateInfo>;

/**
 * `GET /v1/info`, and the reply of `PUT /v1/pools` and `POST|DELETE /v1/drain`. `hibernated`, `archived`,
 * `failed` are omitted at 0; `draining` only while cordoned; `at_capacity(_reason)` only while refill is parked;
 * `peers` absent or empty = mesh of one. `templates` is defaulted to [] so an older node that omits it decodes.
 */
export const Info = z.object({
  pools: z.array(PoolStatus),
  templates: z.array(TemplateInfo).default([]),
  claimed: z.number().int(),
  hibernated: z.number().int().optional(),
  archived: z.number().int().optional(),
  failed: z.number().int().optional(),
  draining: z.boolean().optional(),
  at_capacity: z.boolean().optional(),
  at_capacity_reason: z.string().optional(),
  advertise_addr: z.string(),
  peers: z.array(z.string()).optional(),
});
export type Info = z.infer<typeof Info>;
/** The wire (input) shape of Info, for servers that build it. */
export type InfoWire = z.input<typeof Info>;

export const PeersReply = z.object({ peers: z.array(z.string()) });
export type PeersReply = z.infer<typeof PeersReply>;

// ---------------------------------------------------------------------------------------------------------------
// PUT /v1/pools (§5.4): strict, the node's complete desired set.

/** Pool-entry fields the node's config owns: present in a PUT -> 400. */
export const CONFIG_OWNED_POOL_FIELDS = ["egress", "warmup", "capture_trim", "storage", "egress_upstream_env"] as const;

const nonNegInt = z.number().int().min(0);
export const PoolEntry = z
  .strictObject({
    template: z.string().min(1),
    net: Net.default("none"),
    size: Size.default("small"),
    // Never defaulted to a configured value: absent means 0 (drain this key's warm VMs).
    warm: nonNegInt.default(0),
    warm_max: nonNegInt.optional(),
    idle_hibernate_seconds: nonNegInt.optional(),
    archive_after_seconds: nonNegInt.optional(),
    archive_delete_after_seconds: nonNegInt.optional(),
  })
  .superRefine((e, ctx) => {
    if (e.warm_max && e.warm_max < e.warm) ctx.addIssue({ code: "custom", message: "warm_max < warm", path: ["warm_max"] });
    // An egress-lane VM never hibernates (§4), so an idle-hibernate policy on its pool is a request error.
    if (e.net === "egress" && e.idle_hibernate_seconds)
      ctx.addIssue({ code: "custom", message: "idle_hibernate_seconds is not allowed on an egress pool", path: ["idle_hibernate_seconds"] });
    if (e.archive_after_seconds && e.idle_hibernate_seconds && e.archive_after_seconds <= e.idle_hibernate_seconds)
      ctx.addIssue({ code: "custom", message: "archive_after_seconds must exceed idle_hibernate_seconds", path: ["archive_after_seconds"] });
  });
export type PoolEntry = z.infer<typeof PoolEntry>;
export type PoolEntryInput = z.input<typeof PoolEntry>;

export const PutPoolsRequest = z.strictObject({ pools: z.array(PoolEntry) });
export type PutPoolsRequest = z.infer<typeof PutPoolsRequest>;

/** The node's text for a repeated key (the first duplicate found), or null. */
export function duplicatePoolProblem(entries: readonly PoolEntry[]): string | null {
  const seen = new Set<string>();
  for (const e of entries) {
    const k = poolKeyString(e);
    if (seen.has(k)) return `invalid pool key: duplicate pool "${e.template}"`;
    seen.add(k);
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------------------
// Lifecycle verbs (§4). All lenient (claim-style).

/** `POST …/renew`; an absent body means `ttl_seconds` 0 (-> 300 s). `on_expire` absent keeps the current one. */
export const RenewRequest = z.object({
  ttl_seconds: z.number().int().optional(),
  on_expire: OnExpire.optional(),
});
export type RenewRequest = z.infer<typeof RenewRequest>;
export const RenewReply = z.object({ deadline: WireTime });
export type RenewReply = z.infer<typeof RenewReply>;

/** `POST …/fork`. An empty `token` on a root request means "operator, by id". */
export const ForkRequest = z.object({
  token: z.string().optional(),
  count: z.number().int(),
  ttl_seconds: z.number().int().optional(),
  claim_ref_prefix: z.string().optional(),
  on_expire: OnExpire.optional(),
});
export type ForkRequest = z.infer<typeof ForkRequest>;
export const ForkReply = z.object({ children: z.array(ClaimReply) });
export type ForkReply = z.infer<typeof ForkReply>;

export const PromoteRequest = z.object({
  token: z.string().optional(),
  template: z.string(),
});
export type PromoteRequest = z.infer<typeof PromoteRequest>;
export const PromoteReply = z.object({ key: PoolKey, content_digest: z.string() });
export type PromoteReply = z.infer<typeof PromoteReply>;

export const CheckpointRequest = z.object({
  token: z.string().optional(),
  name: z.string().optional(),
});
export type CheckpointRequest = z.infer<typeof CheckpointRequest>;

export const Checkpoint = z.object({
  id: z.string(),
  name: z.string().optional(),
  sandbox_id: z.string(),
  key: PoolKey,
  tenant: z.string().optional(),
  created_at: WireTime,
});
export type Checkpoint = z.infer<typeof Checkpoint>;
export const CheckpointReply = z.object({ checkpoint: Checkpoint });
export type CheckpointReply = z.infer<typeof CheckpointReply>;
/** `GET /v1/checkpoints`: newest first. */
export const CheckpointList = z.object({ checkpoints: z.array(Checkpoint) });
export type CheckpointList = z.infer<typeof CheckpointList>;

// ---------------------------------------------------------------------------------------------------------------
// Data plane (§5.6)

/**
 * `POST …/preview`: node token in the header, the sandbox's own token in the body (no operator path, so an
 * absent token decodes as "" and fails the token check: 404, as on the node). `ttl_seconds` ≤ 0 asks for the
 * node's default; whatever is granted is clamped to the claim's lease.
 */
export const PreviewRequest = z.object({
  token: z.string().default(""),
  port: z.number().int(),
  ttl_seconds: z.number().int().optional(),
});
export type PreviewRequest = z.infer<typeof PreviewRequest>;
/** `{"url":"http://<preview_advertise>/p/<signed token>/"}`: a browser URL serving the guest port until it expires. */
export const PreviewReply = z.object({ url: z.string().min(1) });
export type PreviewReply = z.infer<typeof PreviewReply>;

/** `PUT /v1/templates/labels`: metadata rules; `{}` clears. */
export const TemplateLabelsRequest = z.object({ labels: Metadata });
export type TemplateLabelsRequest = z.infer<typeof TemplateLabelsRequest>;

/** `PUT …/instance-metadata`: one JSON object of at most 4 KiB. */
export const INSTANCE_METADATA_MAX_BYTES = 4096;
export const InstanceMetadata = z.record(z.string(), z.unknown());
export type InstanceMetadata = z.infer<typeof InstanceMetadata>;
