#!/usr/bin/env bun
// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Standalone entry: flags -> startSimCluster -> print URLs -> wait for a signal. Exit 2 on a usage error, 1 on any
// other fatal startup error (one line naming the flag or file).
import { parseArgs } from "node:util";
import { readFileSync } from "node:fs";
import { isolationLine, startSimCluster, poolSpec, type SimCluster } from "./sim.ts";
import { createAdminHandler, serveAdmin } from "./admin.ts";
import { splitHostPort } from "./node.ts";
import type { TenantConfig } from "./auth.ts";
import { NAME_RE } from "#shared/sandboxd/index.ts";
import { versionLine } from "#shared/version.ts";
import { UsageError } from "#shared/config/index.ts";

export const HELP = `sandboxd-sim — a DEVELOPMENT SUBSTRATE standing in for sandboxd (which needs KVM).
It simulates sandboxd's HTTP API (claims, pools, tokens, mesh redirects, ports relay) with no VMs at all.
Never deploy it as a node daemon.

Usage: bun services/sandboxd-sim/main.ts [flags]

  --listen host:port          node listener (default 127.0.0.1:7777); with --nodes N, node i takes port+i
                              (port 0: every node picks a free port)
  --admin-listen host:port    extra listener serving only the /_sim/* knobs for every node (?node=<index>)
                              (each node also serves /_sim/* on its own listener)
  --token-file path           file holding the root api_token (trimmed); absent = no root token
  --tenant name=token:cap     a tenant and its max_claims (0 = unlimited); repeatable
  --pool template/net/size=N  a warm pool, e.g. base:24.04/none/small=5; repeatable; an idle policy in seconds may
                              follow: base:24.04/none/small=5,idle=60,archive=600,delete=86400 (docs/sleep.md)
  --max-claims N              node max_claims (0 = unlimited)
  --seed S                    deterministic ids and tokens
  --provision-latency D       time to provision one warm VM: 250ms, 2s, or milliseconds (default 0)
  --nodes N                   run N nodes in one process as a mesh (peers of each other)
  --preview-advertise ADDR    host:port (or origin) that minted preview URLs name (default
                              preview.sandboxd-sim.invalid; nothing serves them); "" = no preview listener (501)
  --guests process|none       process (default): every sandbox handed out gets a guest agent speaking envd's
                              protocol; as root its commands run in the sandbox's own Linux namespaces over an
                              overlay root (not a VM, NOT a security boundary), else (fallback, said at startup)
                              as local child processes in its own directory; none: the ports relay reaches nothing
  --guest-dir path            where the guests' directories live (default the OS temp dir); a simulator started
                              on the directory of one killed with SIGKILL removes that one's sandboxes first
  --version                   print the build identity and exit
  --help                      this text

Environment: SANDBOXD_SIM_LOG_LEVEL (debug, info, warn or error; default warn) for the structured line a listener
logs when a handler throws.

With neither --token-file nor --tenant the node is open (no credentials), as sandboxd is without api_token.
`;

function parseDuration(flag: string, v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(v.trim());
  if (!m) throw new UsageError(`--${flag}: cannot parse duration ${JSON.stringify(v)}`);
  const n = Number(m[1]);
  return m[2] === "s" ? n * 1000 : m[2] === "m" ? n * 60_000 : n;
}

function parseInt0(flag: string, v: string | undefined, min = 0): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < min) throw new UsageError(`--${flag}: expected an integer ≥ ${min}, got ${JSON.stringify(v)}`);
  return n;
}

function hostPort(flag: string, v: string): [string, number] {
  try {
    return splitHostPort(v);
  } catch {
    throw new UsageError(`--${flag}: expected host:port, got ${JSON.stringify(v)}`);
  }
}

export interface MainConfig {
  host: string;
  port: number;
  admin?: [string, number];
  tokenFile?: string;
  tenants: Record<string, TenantConfig>;
  pools: string[];
  maxClaims?: number;
  seed?: string;
  provisionLatencyMs?: number;
  nodes: number;
  /** undefined = the simulator's default; null = no preview listener. */
  previewAdvertise?: string | null;
  guests: boolean;
  guestDir?: string;
}

export function parseFlags(argv: string[]): MainConfig | "help" | "version" {
  let v;
  try {
    v = parseArgs({
      args: argv,
      strict: true,
      options: {
        listen: { type: "string" },
        "admin-listen": { type: "string" },
        "token-file": { type: "string" },
        tenant: { type: "string", multiple: true },
        pool: { type: "string", multiple: true },
        "max-claims": { type: "string" },
        seed: { type: "string" },
        "provision-latency": { type: "string" },
        nodes: { type: "string" },
        "preview-advertise": { type: "string" },
        guests: { type: "string" },
        "guest-dir": { type: "string" },
        help: { type: "boolean" },
        version: { type: "boolean" },
      },
    }).values;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (v.help) return "help";
  if (v.version) return "version";
  const [host, port] = hostPort("listen", v.listen ?? "127.0.0.1:7777");
  const tenants: Record<string, TenantConfig> = {};
  for (const t of v.tenant ?? []) {
    const m = /^([^=]+)=([^:]+)(?::(\d+))?$/.exec(t);
    if (!m || !NAME_RE.test(m[1]!)) {
      // Name the tenant, never the rest of the value: it carries the tenant's token, and this line goes to stderr.
      const name = t.includes("=") ? ` ${JSON.stringify(t.slice(0, t.indexOf("=")))}` : "";
      throw new UsageError(`--tenant${name}: expected name=token:cap`, { flag: "--tenant" });
    }
    tenants[m[1]!] = { token: m[2]!, max_claims: Number(m[3] ?? 0) };
  }
  for (const p of v.pool ?? []) {
    try {
      poolSpec(p);
    } catch (e) {
      throw new UsageError(`--pool: ${(e as Error).message}`);
    }
  }
  const guests = v.guests ?? "process";
  if (guests !== "process" && guests !== "none") throw new UsageError(`--guests: expected process or none, got ${JSON.stringify(guests)}`);
  return {
    host,
    port,
    guests: guests === "process",
    guestDir: v["guest-dir"],
    admin: v["admin-listen"] ? hostPort("admin-listen", v["admin-listen"]) : undefined,
    tokenFile: v["token-file"],
    tenants,
    pools: v.pool ?? [],
    maxClaims: parseInt0("max-claims", v["max-claims"]),
    seed: v.seed,
    provisionLatencyMs: v["provision-latency"] !== undefined ? parseDuration("provision-latency", v["provision-latency"]) : undefined,
    nodes: parseInt0("nodes", v.nodes, 1) ?? 1,
    previewAdvertise: v["preview-advertise"] === undefined ? undefined : v["preview-advertise"].trim() || null,
  };
}

export async function run(argv: string[]): Promise<number> {
  let cfg: MainConfig | "help" | "version";
  try {
    cfg = parseFlags(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`sandboxd-sim: ${e.message}\n\n${HELP}`);
      return 2;
    }
    throw e;
  }
  if (cfg === "version") {
    console.log(versionLine("sandboxd-sim"));
    return 0;
  }
  if (cfg === "help") {
    console.log(HELP);
    return 0;
  }
  let rootToken: string | undefined;
  if (cfg.tokenFile) {
    try {
      rootToken = readFileSync(cfg.tokenFile, "utf8").trim() || undefined;
    } catch (e) {
      console.error(`sandboxd-sim: --token-file ${cfg.tokenFile}: ${(e as Error).message}`);
      return 1;
    }
  }
  let cluster: SimCluster;
  try {
    const ports = Array.from({ length: cfg.nodes }, (_, i) => (cfg.port === 0 ? 0 : cfg.port + i));
    cluster = await startSimCluster(cfg.nodes, {
      host: cfg.host,
      ports,
      rootToken,
      tenants: cfg.tenants,
      pools: cfg.pools,
      maxClaims: cfg.maxClaims,
      seed: cfg.seed,
      provisionLatencyMs: cfg.provisionLatencyMs,
      previewAdvertise: cfg.previewAdvertise,
      guestAgents: cfg.guests ? (cfg.guestDir ? { dir: cfg.guestDir } : true) : false,
    });
  } catch (e) {
    console.error(`sandboxd-sim: --listen ${cfg.host}:${cfg.port}: ${(e as Error).message}`);
    return 1;
  }
  let admin: ReturnType<typeof Bun.serve> | undefined;
  if (cfg.admin) {
    const handler = createAdminHandler((req) => cluster.nodes[Number(new URL(req.url).searchParams.get("node") ?? 0)]);
    try {
      admin = serveAdmin(cfg.admin[0], cfg.admin[1], handler);
    } catch (e) {
      console.error(`sandboxd-sim: --admin-listen: ${(e as Error).message}`);
      await cluster.stop();
      return 1;
    }
  }
  console.log("sandboxd-sim: development substrate standing in for sandboxd (no VMs, no KVM)");
  if (cfg.guests) console.log(`sandboxd-sim: ${isolationLine()}`);
  cluster.nodes.forEach((n, i) => console.log(`sandboxd-sim: node ${i} listening on ${n.url}`));
  if (admin) console.log(`sandboxd-sim: admin listening on http://${cfg.admin![0]}:${admin.port}/_sim/`);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await admin?.stop(true);
  await cluster.stop();
  return 0;
}

if (import.meta.main) {
  run(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      console.error(`sandboxd-sim: ${(e as Error).message}`);
      process.exit(1);
    },
  );
}
