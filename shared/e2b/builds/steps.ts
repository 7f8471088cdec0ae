// The wire shapes of the build API (docs/e2b.md §6.1) and the check of a start's steps: the first invalid step is
// a 400 naming its 1-based index, before anything is claimed.
import { z } from "@hono/zod-openapi";
import { badRequest } from "../errors.ts";
import { BUILT_PREFIX, NAME_BUDGET } from "../render.ts";
import { looksBuilt } from "../../built-templates/index.ts";
import { FILES_HASH_RE } from "../uploads/index.ts";

/** Bounds on what one start may carry: every field comes from a key holder. */
export const MAX_STEPS = 512;
const MAX_ARG = 64 * 1024;

export const RequestBuildBody = z
  .object({
    name: z.string().max(256).optional(),
    alias: z.string().max(256).optional(),
    tags: z.array(z.string().max(128)).max(16).optional(),
    cpuCount: z.number().int().min(0).max(1024).optional(),
    memoryMB: z.number().int().min(0).max(1 << 24).optional(),
    minFreeDiskMb: z.number().int().min(0).optional(),
  })
  .openapi("TemplateBuildRequestV3");
export type RequestBuildBody = z.infer<typeof RequestBuildBody>;

export const Step = z.object({
  type: z.string().max(32),
  args: z.array(z.string().max(MAX_ARG)).max(1024).default([]),
  filesHash: z.string().max(128).nullish(),
  force: z.boolean().nullish(),
  forceUpload: z.boolean().nullish(),
  resolveSymlinks: z.boolean().nullish(),
  gzip: z.boolean().nullish(),
});
export type Step = z.infer<typeof Step>;

export const StartBuildBody = z
  .object({
    fromImage: z.string().max(512).nullish(),
    fromTemplate: z.string().max(512).nullish(),
    fromImageRegistry: z.unknown().optional(),
    steps: z.array(Step).max(MAX_STEPS).default([]),
    startCmd: z.string().max(MAX_ARG).nullish(),
    readyCmd: z.string().max(MAX_ARG).nullish(),
    force: z.boolean().nullish(),
  })
  .openapi("TemplateBuildStartV2");
export type StartBuildBody = z.infer<typeof StartBuildBody>;

export const StatusQuery = z.object({
  logsOffset: z.string().optional(),
  limit: z.string().optional(),
  level: z.string().optional(),
});

/** A validated step the executor runs. */
export type BuildStep =
  | { type: "RUN"; cmd: string; user?: string }
  | { type: "ENV"; env: [string, string][] }
  | { type: "WORKDIR"; dir: string }
  | { type: "USER"; user: string }
  | { type: "COPY"; src: string; dest: string; hash: string; owner?: string; mode?: string };

export interface BuildPlan {
  fromImage: string;
  steps: BuildStep[];
  /** Steps from this index on run even when cached (the SDK's `skipCache`: `force` on the build or a step). */
  cacheUpTo: number;
  startCmd?: string;
  readyCmd?: string;
}

const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A user or group name as useradd takes it (also `user:group` for COPY's owner). */
const USER_RE = /^[a-z_][a-z0-9_-]{0,31}$/i;
const MODE_RE = /^[0-7]{3,4}$/;

/** Check a start body against the spec's rules; `hasStore` says whether COPY can be served at all. */
export function planOf(b: StartBuildBody, hasStore: boolean): BuildPlan {
  if (b.fromTemplate) throw badRequest("fromTemplate is not supported: build from an image (fromImage)");
  if (b.fromImageRegistry !== undefined && b.fromImageRegistry !== null) throw badRequest("fromImageRegistry is not supported: images come from the fleet's pools");
  const fromImage = (b.fromImage ?? "").trim();
  if (fromImage === "") throw badRequest("fromImage is required");
  if (looksBuilt(fromImage)) throw badRequest(`fromImage "${fromImage}" is not addressable`);
  const steps = b.steps.map((s, i) => stepOf(s, i + 1, hasStore));
  const forced = b.steps.findIndex((s) => s.force === true);
  const cacheUpTo = b.force === true ? 0 : forced >= 0 ? forced : steps.length;
  return { fromImage, steps, cacheUpTo, ...(b.startCmd ? { startCmd: b.startCmd } : {}), ...(b.readyCmd ? { readyCmd: b.readyCmd } : {}) };
}

function stepOf(s: Step, n: number, hasStore: boolean): BuildStep {
  const bad = (why: string) => badRequest(`step ${n} (${s.type}): ${why}`);
  const a = s.args;
  switch (s.type) {
    case "RUN":
      if (!a[0]) throw bad("needs a command");
      if (a[1] && !USER_RE.test(a[1])) throw bad(`invalid user ${JSON.stringify(a[1].slice(0, 40))}`);
      return { type: "RUN", cmd: a[0], ...(a[1] ? { user: a[1] } : {}) };
    case "WORKDIR":
      if (!a[0]) throw bad("needs a directory");
      return { type: "WORKDIR", dir: a[0] };
    case "USER":
      if (!a[0]) throw bad("needs a user");
      if (!USER_RE.test(a[0])) throw bad(`invalid user ${JSON.stringify(a[0].slice(0, 40))}`);
      return { type: "USER", user: a[0] };
    case "ENV": {
      if (a.length === 0 || a.length % 2 !== 0) throw bad("needs key/value pairs");
      const env: [string, string][] = [];
      for (let i = 0; i < a.length; i += 2) {
        if (!ENV_KEY_RE.test(a[i]!)) throw bad(`invalid variable name ${JSON.stringify(a[i]!.slice(0, 40))}`);
        env.push([a[i]!, a[i + 1]!]);
      }
      return { type: "ENV", env };
    }
    case "COPY": {
      if (!a[0] || !a[1]) throw bad("needs a source and a destination");
      if (!s.filesHash || !FILES_HASH_RE.test(s.filesHash)) throw bad("filesHash must be 64 lowercase hex characters");
      if (!hasStore) throw bad("no upload store is configured (--e2b-build-dir or --e2b-build-store-s3-bucket)");
      if (a[0].startsWith("/") || a[0].split("/").includes("..")) throw bad("the source must be a relative path inside the context");
      const owner = a[2] ?? "";
      if (owner !== "" && !owner.split(":").every((p) => USER_RE.test(p))) throw bad(`invalid owner ${JSON.stringify(owner.slice(0, 40))}`);
      const mode = a[3] ?? "";
      if (mode !== "" && !MODE_RE.test(mode)) throw bad(`invalid mode ${JSON.stringify(mode.slice(0, 40))}`);
      return { type: "COPY", src: a[0], dest: a[1], hash: s.filesHash, ...(owner ? { owner } : {}), ...(mode ? { mode } : {}) };
    }
    default:
      throw bad("unsupported step type");
  }
}

/** The build's name: `name` ?? `alias`, a `:tag` suffix split off into tags; the stamped name must fit. */
export function nameOf(b: RequestBuildBody, ns: string): { name: string; tags: string[] } {
  let name = (b.name ?? b.alias ?? "").trim();
  const tags = [...(b.tags ?? [])];
  const colon = name.indexOf(":");
  if (colon >= 0) {
    const tag = name.slice(colon + 1);
    name = name.slice(0, colon);
    if (tag !== "") tags.unshift(tag);
  }
  if (name === "") throw badRequest("name is required");
  if (!/^[a-z0-9][a-z0-9._-]*$/i.test(name)) throw badRequest(`name "${name.slice(0, 80)}": letters, digits, '.', '_' and '-' only, not starting with '.'`);
  if (`${BUILT_PREFIX}${ns}/${name}`.length > NAME_BUDGET) throw badRequest(`name "${name.slice(0, 80)}": at most ${NAME_BUDGET - BUILT_PREFIX.length - ns.length - 1} characters in namespace "${ns}"`);
  for (const t of tags) if (!/^[\x21-\x7e]{1,128}$/.test(t) || /[=&:]/.test(t)) throw badRequest(`tags: invalid tag ${JSON.stringify(t.slice(0, 140))}`);
  return { name, tags: [...new Set(tags)] };
}

/** Size tier from the requested resources (none given: decided at start from the alias). */
export function sizeOf(b: RequestBuildBody): "small" | "medium" | "large" | undefined {
  if (b.cpuCount === undefined && b.memoryMB === undefined) return undefined;
  const cpu = b.cpuCount ?? 0;
  const mem = b.memoryMB ?? 0;
  if (cpu > 4 || mem > 8192) return "large";
  if (cpu > 1 || mem > 2048) return "medium";
  return "small";
}
