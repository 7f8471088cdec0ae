// Helpers for the build tests: a stack with builds on (simulated nodes with their envd-compatible guest agents,
// sandbox-e2b from its real flags), raw calls to the build API, and the count of build sandboxes still claimed.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { DOMAIN, KEY_A, ROOT, startStack, type Stack, type StackOptions } from "../e2b/harness.ts";
import { waitFor } from "#tests/support/wait.ts";

export { KEY_A, KEY_B, sdkOpts } from "../e2b/harness.ts";
export type { Stack } from "../e2b/harness.ts";

export interface BuildStack extends Stack {
  /** The --e2b-build-dir (undefined: no store). */
  uploads: string | undefined;
}

export async function startBuildStack(o: { store?: boolean; parallel?: number; timeout?: string; uploadMax?: number; nodes?: number; extra?: string[] } & Pick<StackOptions, "proxy" | "keys"> = {}): Promise<BuildStack> {
  const uploads = o.store === false ? undefined : join(mkdtempSync(join(tmpdir(), "e2b-uploads-")), "store");
  const s = await startStack({
    guestAgents: true,
    nodes: o.nodes ?? 1,
    pools: ["img:1/none/small=3"],
    ...(o.proxy ? { proxy: true } : {}),
    ...(o.keys !== undefined ? { keys: o.keys } : {}),
    extraFlags: [
      "--e2b-builds",
      `--e2b-build-parallel=${o.parallel ?? 2}`,
      `--e2b-build-timeout=${o.timeout ?? "2m"}`,
      ...(o.uploadMax ? [`--e2b-build-upload-max=${o.uploadMax}`] : []),
      ...(uploads ? [`--e2b-build-dir=${uploads}`] : []),
      ...(o.extra ?? []),
    ],
  });
  const stop = s.stop;
  return {
    ...s,
    uploads,
    stop: async () => {
      await stop();
      if (uploads) rmSync(dirname(uploads), { recursive: true, force: true });
    },
  };
}

export async function api(s: Stack, method: string, path: string, body?: unknown, key = KEY_A): Promise<{ status: number; json: any; text: string }> {
  const res = await fetch(`${s.apiUrl}${path}`, {
    method,
    headers: { "x-api-key": key, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** Build sandboxes (claim_ref `<ns>/e2b-build-…`) still claimed on any node. */
export function buildClaims(s: Stack): number {
  return s.cluster.nodes.flatMap((n) => n.claims()).filter((c) => (c.claimRef ?? "").includes("/e2b-build-")).length;
}

export async function requestBuild(s: Stack, name: string, extra: Record<string, unknown> = {}): Promise<{ templateID: string; buildID: string }> {
  const r = await api(s, "POST", "/v3/templates", { name, ...extra });
  if (r.status !== 202) throw new Error(`POST /v3/templates: ${r.status} ${r.text}`);
  return r.json;
}

export async function waitBuild(s: Stack, b: { templateID: string; buildID: string }, timeoutMs = 60_000): Promise<any> {
  return waitFor(
    `build ${b.templateID}/${b.buildID} to finish`,
    async () => {
      const r = await api(s, "GET", `/templates/${b.templateID}/builds/${b.buildID}/status`);
      return r.json?.status === "ready" || r.json?.status === "error" ? r.json : undefined;
    },
    timeoutMs,
    100,
  );
}

/** Every log line, paged as the SDKs do: logsOffset on until an empty page (a page holds at most 1000 / 1 MiB). */
export async function allLogs(s: Stack, b: { templateID: string; buildID: string }): Promise<{ message: string; step: string; level: string }[]> {
  const out: { message: string; step: string; level: string }[] = [];
  for (;;) {
    const r = await api(s, "GET", `/templates/${b.templateID}/builds/${b.buildID}/status?logsOffset=${out.length}`);
    if (!r.json.logEntries.length) return out;
    out.push(...r.json.logEntries);
  }
}

/** A second sandbox-e2b replica on the same nodes, keys and secret (scenario 48). */
export async function startReplica(s: Stack, extra: string[] = []): Promise<{ apiUrl: string; stop(): Promise<void> }> {
  const { parseE2bMeshFlags } = await import("#services/sandbox-e2b/flags.ts");
  const { startE2bMesh } = await import("#services/sandbox-e2b/wire.ts");
  const { createLogger } = await import("#shared/log/index.ts");
  const argv = [
    `--sandboxd-seeds=${s.cluster.nodes.map((n) => n.addr).join(",")}`,
    `--sandboxd-token=${ROOT}`,
    "--inventory-poll=200ms",
    "--e2b-bind-address=127.0.0.1:0",
    `--e2b-domain=${DOMAIN}`,
    `--e2b-envd-secret-file=${join(s.dir, "secret")}`,
    `--e2b-template-alias-file=${join(s.dir, "aliases")}`,
    `--e2b-api-key-file=${join(s.dir, "keys")}`,
    "--e2b-builds",
    ...extra,
  ];
  const parsed = parseE2bMeshFlags(argv, {});
  if (parsed.kind !== "run") throw new Error("unexpected flag outcome");
  const mesh = await startE2bMesh(parsed.config, createLogger({ level: "error", name: "sandbox-e2b-2" }));
  return { apiUrl: `http://127.0.0.1:${mesh.e2bPort}`, stop: () => mesh.stop() };
}

/** A gzipped tar of `files` (relative path -> content), as the SDK uploads for COPY. */
export function tarOf(files: Record<string, string>): Uint8Array {
  const dir = mkdtempSync(join(tmpdir(), "e2b-tar-"));
  try {
    for (const [p, content] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, "ctx", p)), { recursive: true });
      writeFileSync(join(dir, "ctx", p), content);
    }
    const r = Bun.spawnSync(["tar", "-czf", join(dir, "a.tar.gz"), "-C", join(dir, "ctx"), ...Object.keys(files)]);
    if (r.exitCode !== 0) throw new Error(`tar: ${r.stderr.toString()}`);
    return new Uint8Array(readFileSync(join(dir, "a.tar.gz")));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
