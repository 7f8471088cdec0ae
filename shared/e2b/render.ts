// How the e2b surface renders what nodes report (docs/e2b.md "Replies"): public ids, opaque client ids, template
// names without the built-template prefix, second-precision wire times, and each sandbox's envd access token.
import type { Clock } from "../clock/index.ts";
import type { SandboxDetail } from "../sandboxd/index.ts";
import { parseWireTime } from "../sandboxd/index.ts";
import { clientMetadata } from "./surface-metadata.ts";
import { publicSandboxId } from "./ids.ts";
import type { Located } from "./nodes.ts";
import type { ListedRow } from "./own-writes.ts";
import type { ListedSandbox, SandboxReply } from "./schemas.ts";
import { envdAccessToken, opaqueClientId } from "./tokens.ts";
import { BUILT_PREFIX } from "../built-templates/index.ts";
import { E2B_CLOUD_PUBLIC_TRAFFIC, publicTrafficStamp, trafficAccessToken, type PublicTrafficPolicy } from "../envd-token/index.ts";

/** Checkpoint names and stamped refs: at most this long on the node. */
export const NAME_BUDGET = 63;
/** Built templates are promoted as `e2b/<namespace>/<name>`; the prefix is never addressable by clients. */
export { BUILT_PREFIX };

/** RFC 3339 UTC, second precision (the surface's wire time). */
export function wireTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.000Z$/, "Z");
}

export const isPaused = (row: { hibernated: boolean; archived?: boolean }) => row.hibernated || row.archived === true;

export interface RenderSettings {
  domain: string;
  envdVersion: string;
  defaultTimeoutSeconds: number;
  envdSecret: string;
  /** Public user ports (shared/envd-token/traffic.ts); unset: e2b cloud's (public unless the create said otherwise). */
  publicTraffic?: PublicTrafficPolicy;
}

export class Renderer {
  constructor(
    private readonly settings: RenderSettings,
    /** image -> its aliases, sorted; a reply's `alias` is the first. */
    private readonly imageAliases: ReadonlyMap<string, string[]>,
    private readonly clock: Clock,
  ) {}

  /** What a client sees as templateID: built templates by their bare name, pool images as they are. */
  displayTemplate(template: string): string {
    if (!template.startsWith(BUILT_PREFIX)) return template;
    const rest = template.slice(BUILT_PREFIX.length);
    const i = rest.indexOf("/");
    return i >= 0 ? rest.slice(i + 1) : rest;
  }

  private aliasOf(image: string): string | undefined {
    return this.imageAliases.get(image)?.[0];
  }

  /**
   * Whether a claim's user ports are public: only when its create stamped them so (the relay's rule, shared/relay
   * public-ports.ts: a claim without the stamp is private); never when forbidden.
   */
  servesPublicly(metadata: Readonly<Record<string, string>> | undefined): boolean {
    const policy = this.settings.publicTraffic ?? E2B_CLOUD_PUBLIC_TRAFFIC;
    return !policy.forbid && publicTrafficStamp(metadata) === true;
  }

  /**
   * `accessToken`: the token the sandbox's envd holds when it is not the current form (token-forms.ts). `metadata`:
   * the claim's, whose public-ports stamp decides whether the reply carries a `trafficAccessToken` (create, connect
   * and fork replies all do: the SDK keeps the latest).
   */
  sandboxReply(o: { claimId: string; nodeName: string; template: string; claimToken: string; accessToken?: string; metadata: Readonly<Record<string, string>> | undefined }): SandboxReply {
    const templateID = this.displayTemplate(o.template);
    const alias = this.aliasOf(o.template);
    return {
      templateID,
      sandboxID: publicSandboxId(o.claimId),
      clientID: opaqueClientId(o.nodeName),
      envdVersion: this.settings.envdVersion,
      envdAccessToken: o.accessToken ?? envdAccessToken(this.settings.envdSecret, o.claimId, o.claimToken),
      domain: this.settings.domain,
      ...(alias ? { alias } : {}),
      ...(this.servesPublicly(o.metadata) ? {} : { trafficAccessToken: trafficAccessToken(this.settings.envdSecret, o.claimToken) }),
    };
  }

  listed(o: ListedRow): ListedSandbox {
    const startedMs = o.claimedAt ?? this.clock.now();
    const metadata = clientMetadata(o.metadata);
    const endMs = o.deadline ?? startedMs + this.settings.defaultTimeoutSeconds * 1000;
    const alias = this.aliasOf(o.template);
    return {
      templateID: this.displayTemplate(o.template),
      ...(alias ? { alias } : {}),
      sandboxID: publicSandboxId(o.claimId),
      clientID: opaqueClientId(o.nodeName),
      startedAt: wireTime(startedMs),
      endAt: wireTime(endMs),
      state: o.paused ? "paused" : "running",
      envdVersion: this.settings.envdVersion,
      cpuCount: o.cpuCount ?? 0,
      memoryMB: Math.floor((o.memoryBytes ?? 0) / 1024 / 1024),
      diskSizeMB: 0,
      ...(metadata && Object.keys(metadata).length ? { metadata } : {}),
      domain: this.settings.domain,
    };
  }

  detailFromRow(loc: Located, row: SandboxDetail): ListedSandbox {
    const deadline = row.deadline ? parseWireTime(row.deadline) : null;
    const claimedAt = row.claimed_at ? parseWireTime(row.claimed_at) : null;
    return this.listed({
      claimId: loc.claimId,
      nodeName: loc.nodeName,
      template: row.key.template,
      claimedAt: claimedAt ?? undefined,
      deadline: deadline && deadline > 0 ? deadline : undefined,
      paused: isPaused(row),
      cpuCount: row.cpu_count,
      memoryBytes: row.mem_total_bytes,
      metadata: row.metadata,
    });
  }
}

/** The caller's own metadata: the public-ports stamp (traffic.ts) is ours, never shown. */
