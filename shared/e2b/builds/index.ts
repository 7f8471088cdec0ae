// shared/e2b/builds — the e2b template build API (docs/e2b.md "Builds"), behind --e2b-builds:
//   settings.ts the flags' settings; steps.ts wire shapes and step validation; records.ts build records and their
//   log; slots.ts concurrent builds; envd-client.ts envd over the relay; executor.ts the steps; finalize.ts
//   defaults, start/ready commands, promote and publish; service.ts the behaviour; routes.ts the routes.
import type { Clock } from "../../clock/index.ts";
import type { E2bOptions } from "../../config/index.ts";
import type { Logger } from "../../log/index.ts";
import type { AliasTarget } from "../files.ts";
import type { NodeAccess } from "../nodes.ts";
import type { NamespaceQuotas } from "../quotas.ts";
import { createUploadStore } from "../uploads/index.ts";
import { registerBuildRoutes, type BuildRouteMount } from "./routes.ts";
import { BuildService } from "./service.ts";
import { buildSettingsFrom } from "./settings.ts";

export { BuildService, type BuildStatusReply } from "./service.ts";
export { buildSettingsFrom, type BuildSettings } from "./settings.ts";
export { registerBuildRoutes, originOf, type BuildRouteMount } from "./routes.ts";

/**
 * The build module for a surface, or undefined when --e2b-builds is off. Startup refusals (bad options, a build
 * directory that cannot be created, S3 settings this build cannot serve) throw StartupErrors naming the flag.
 */
export function loadBuilds(
  options: E2bOptions["builds"],
  deps: { nodes: NodeAccess; aliases: ReadonlyMap<string, AliasTarget>; envdSecret: string; log: Logger; clock?: Clock; quotas?: Pick<NamespaceQuotas, "admit"> },
): { service: BuildService; routes: (mount: BuildRouteMount) => void } | undefined {
  const settings = buildSettingsFrom(options);
  if (!settings) return undefined;
  const store = createUploadStore(settings.store, {
    envdSecret: deps.envdSecret,
    ...(deps.clock ? { clock: deps.clock } : {}),
    onLoadError: (err) => deps.log.error({ err, flag: "--e2b-build-store-s3-bucket" }, "e2b: the S3 upload store could not be loaded; every files link and COPY step fails"),
  });
  const service = new BuildService(settings, { nodes: deps.nodes, aliases: deps.aliases, store, log: deps.log.child({ component: "e2b-builds" }), ...(deps.clock ? { clock: deps.clock } : {}), ...(deps.quotas ? { quotas: deps.quotas } : {}) });
  return { service, routes: (mount) => registerBuildRoutes(mount, service) };
}
