// shared/e2b — the e2b-compatible REST surface (docs/e2b.md "Layout"), one hono app for sandbox-e2b and
// sandbox-apiserver.
//   files.ts    alias / envd secret files (startup checks); keys.ts the key file (namespaces, quota fields)
//   app.ts      auth, /openapi.json, the error mapping; it registers routes-sandboxes.ts and routes-templates.ts
//               through route-kit.ts, and a build module's routes through its `buildRoutes` hook
//   surface.ts  the composition root: each resource module gets only the node and fleet access it needs
//   create.ts, sandboxes.ts, fork.ts, sandbox-metrics.ts  what each sandbox endpoint does (lookup.ts: the live
//               read they share; own-writes.ts this replica's writes over the snapshot; idempotency.ts and
//               surface-metadata.ts Idempotency-Key); templates.ts templates and tags; snapshots.ts snapshots;
//               quotas.ts per-namespace quotas; placement.ts claim placement; render.ts replies; token-forms.ts
//               which token an old sandbox's envd holds; nodes.ts owner lookup; envd.ts /init and envd /metrics;
//               list.ts list paging
//   ids.ts, tokens.ts, errors.ts  id forms and access tokens (both from shared/envd-token, which the relay
//               shares), the {code,message} envelope
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { E2bOptions } from "../config/index.ts";
import { splitHostPort } from "../config/index.ts";
import { StartupError } from "../config/index.ts";
import type { FleetSource } from "../fleet/index.ts";
import type { Logger } from "../log/index.ts";
import type { Registry } from "../metrics/index.ts";
import { guardRequests, uncaughtErrorHandler } from "../http/index.ts";
import { createE2bApp } from "./app.ts";
import { loadBuilds } from "./builds/index.ts";
import { errorResponse } from "./errors.ts";
import { readAliasFile, readEnvdSecret, readKeyFile } from "./files.ts";
import type { BuildRoutes } from "./route-kit.ts";
import { E2bSurface } from "./surface.ts";

export { createE2bApp, namespaceForKey } from "./app.ts";
export { E2bSurface, type E2bSettings, type E2bDeps, type SandboxEvents } from "./surface.ts";
export type { BuildMount, BuildRoutes, E2bEnv, E2bHandler, RouteKit, SignedHandler } from "./route-kit.ts";
export { accessTokenHash, accessTokenMatches, carriesLaneTag, deriveAccessToken, envdAccessToken, safeEqual } from "./tokens.ts";
export { ENVD_PORT, type EnvdTarget, initEnvd } from "./envd.ts";
export { claimIdOf, publicSandboxId, sameSandboxId } from "./ids.ts";
export { E2B_CLOUD_PUBLIC_TRAFFIC, PUBLIC_TRAFFIC_METADATA_KEY, TRAFFIC_TOKEN_HEADER, publicTrafficStamp, trafficTokenMatches, type PublicTrafficPolicy } from "../envd-token/index.ts";
import type { PublicTrafficPolicy } from "../envd-token/index.ts";
export { readEnvdSecret, resolveRootToken } from "./files.ts";

export interface LoadE2bOptions {
  /** Already checked with checkE2bOptions (shared/config). */
  options: E2bOptions;
  fleet: FleetSource;
  /** The fleet root sandboxd token, resolved (file wins over literal). */
  rootToken: string;
  log: Logger;
  /** Called after a kill (the in-process proxy drops its cached owner). */
  onReleased?: (claimId: string) => void;
  /** Called after a claim is initialised (the in-process proxy learns its owner). */
  onClaimed?: (claimId: string, address: string, claimToken: string, namespace: string, publicTraffic: boolean) => void;
  /** Public user ports (traffic.ts); unset: e2b cloud's policy. */
  publicTraffic?: PublicTrafficPolicy;
  /** Where the quota series register (sandbox-apiserver: its own /metrics registry); default: their own. */
  metricsRegistry?: Registry;
  /**
   * Another template-build module's routes (tests), asked for only under --e2b-builds. Unset: this folder's own
   * (shared/e2b/builds/). Builds off: the build routes answer 501.
   */
  builds?: (surface: E2bSurface) => BuildRoutes;
}

export interface LoadedE2b {
  surface: E2bSurface;
  app: OpenAPIHono<{ Variables: { namespace: string } }>;
  /** The envd secret (the in-process proxy verifies tokens with the same one). */
  envdSecret: string;
  /** Listen on `address` (`host:port`, `:port`). */
  serve(address: string): ReturnType<typeof Bun.serve>;
}

/** Read the key, alias and secret files (StartupError naming the flag on any problem) and build the app. */
export function loadE2bSurface(o: LoadE2bOptions): LoadedE2b {
  const opts = o.options;
  const keyFile = opts.apiKeyFile === undefined ? { keys: new Map<string, string>(), quotas: new Map() } : readKeyFile(opts.apiKeyFile, opts.namespace);
  const keys = keyFile.keys;
  if (keys.size === 0 && !opts.allowAnonymous) {
    throw new StartupError("e2b: no API key configured: the key file has no entries; add keys or set --e2b-allow-anonymous", { flag: "--e2b-api-key-file" });
  }
  if (opts.envdSecretFile === undefined) throw new StartupError("--e2b-envd-secret-file is required", { flag: "--e2b-envd-secret-file" });
  const envdSecret = readEnvdSecret(opts.envdSecretFile);
  const aliases = opts.templateAliasFile === undefined ? new Map() : readAliasFile(opts.templateAliasFile);
  const surface = new E2bSurface(
    {
      namespace: opts.namespace,
      domain: opts.domain,
      envdVersion: opts.envdVersion,
      defaultTimeoutSeconds: opts.defaultTimeoutSeconds,
      aliases,
      envdSecret,
      rootToken: o.rootToken,
      quotas: keyFile.quotas,
      defaultQuota: opts.defaultQuota,
      // Anonymous mode claims in --e2b-namespace only.
      namespaces: keys.size > 0 ? new Set(keys.values()) : [opts.namespace],
      ...(o.publicTraffic ? { publicTraffic: o.publicTraffic } : {}),
    },
    {
      fleet: o.fleet,
      log: o.log.child({ component: "e2b" }),
      ...(o.onReleased ? { onReleased: o.onReleased } : {}),
      ...(o.onClaimed ? { onClaimed: o.onClaimed } : {}),
      ...(o.metricsRegistry ? { metricsRegistry: o.metricsRegistry } : {}),
    },
  );
  // The build module of this folder unless the caller brings its own (tests); undefined while --e2b-builds is off.
  const builds = o.builds ? undefined : loadBuilds(opts.builds, { nodes: surface.nodes, aliases, envdSecret, log: o.log.child({ component: "e2b" }), quotas: surface.quotas });
  const buildRoutes = opts.builds.enabled ? (o.builds ? o.builds(surface) : builds?.routes) : undefined;
  const app = createE2bApp({ surface, keys, defaultNamespace: opts.namespace, log: o.log.child({ component: "e2b" }), ...(buildRoutes ? { buildRoutes } : {}) });
  return {
    surface,
    app,
    envdSecret,
    serve(address) {
      const { host, port } = splitHostPort(address);
      const server = Bun.serve({
        hostname: host === "" ? "0.0.0.0" : host,
        port: Number(port),
        idleTimeout: 255,
        // The signed upload PUT streams up to --e2b-build-upload-max (its own bound, checked as bytes arrive); every
        // other body keeps body.ts's 1 MiB cap.
        ...(builds ? { maxRequestBodySize: Math.max(opts.builds.uploadMax + 1, 128 * 1024 * 1024) } : {}),
        // Never Bun's development page: odd request targets get the e2b envelope before hono, a throw one log line.
        development: false,
        error: uncaughtErrorHandler(o.log.child({ component: "e2b" }), errorResponse),
        fetch: guardRequests(errorResponse, (req: Request) => app.fetch(req)),
      });
      if (!builds) return server;
      // Stopping the listener also stops the running builds: each releases its build sandbox first.
      const stopListener = server.stop.bind(server);
      return Object.assign(server, { stop: async (force?: boolean) => (await builds.service.stop(), stopListener(force)) });
    },
  };
}
