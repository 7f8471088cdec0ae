// Judges Python SDK scenario records against what e2b cloud answers, call by call: "ok" is e2b cloud's behaviour,
// "differs" a behaviour it does not have (with the reason, shared by every cell that has it), "fails" what no user
// could live with (the suites assert there is none). The cells become docs/sdk-matrix.md (./matrix.ts).
import type { Cell, Verdict } from "./matrix.ts";
import type { ScenarioRecord, ScenarioStep } from "./scenario.ts";
import type { WireProtocol } from "./wire-tap.ts";

const FILE_PATH = "/home/user/py-matrix.txt";
const FILE_TEXT = "written by the Python SDK";

export const REASONS = {
  listLag:
    "a list right after a create or a kill did not show the change at once. Since issue 20 part 2 (read-your-writes) the replica that made a write lists it at once and other replicas within one inventory poll (mesh) or NodeInventory publish (full stack); e2b cloud lists it at once everywhere. Both stacks here run one e2b replica, so this cell reading differs means the write was not seen by the replica that made it: a regression to look into, not the design",
  plainHttp:
    "every connection was HTTP/1.1: the local stacks are plain http, and the SDK's transport (pyqwest over reqwest) reaches HTTP/2 only through TLS ALPN and \"uses HTTP/1 for plaintext\" (its own comment), never prior-knowledge h2c, which the envd relay would accept; so the default E2B_HTTP_VERSION=2 speaks HTTP/1.1 here. The \"behind a TLS edge\" column shows HTTP/2 does work on the sandbox URL once TLS is in front; with only E2B_DOMAIN set the SDK speaks HTTPS to the stacks' own wildcard name and negotiates h2 there, on the API host and the sandbox hosts alike (file downloads excepted: the SDK pins them to HTTP/1.1 itself; tests/e2e/sdk-scheme/scheme.test.ts checks it)",
  guestPaths:
    "the simulator's guest (a process sandbox per claim, the development substrate) has no filesystem namespace yet: the home directory is a per-sandbox directory under the host's /tmp and the sandbox has no / of its own, so `pwd` is not /home/user and a cwd outside the sandbox's tree is refused (issue 18, not yet delivered)",
  guestUser:
    "the simulator's guest runs every command as the user the node runs as (root on this machine), so the default user is not uid 1000 and `user` changes nothing (issue 18, per-sandbox users, not yet delivered)",
  killAgain:
    "a kill by id right after a kill answered true as if it had killed the sandbox again; e2b cloud answers false (not found). Since issue 20 part 2 (read-your-writes) the replica that killed it answers false at once, another replica within one poll or publish; on these one-replica stacks a true means the replica forgot its own kill",
  idempotency:
    "the second create with the same Idempotency-Key made a second sandbox, where e2b cloud returns the first (the SDK's own retries of a create would leak a sandbox until its timeout). Issue 20 part 4 returns the first sandbox for the key within its window on any replica, so a differs here means the key was not honoured",
} as const;

type Judged = [Verdict, string, string?];

const Converged = (v: unknown): v is { at_once: boolean; agreed: boolean; after_ms: number } =>
  typeof v === "object" && v !== null && typeof (v as { at_once?: unknown }).at_once === "boolean" && typeof (v as { agreed?: unknown }).agreed === "boolean";

function describeStep(s: ScenarioStep): string {
  if (s.status === "ok") return `returned ${JSON.stringify(s.value)}`;
  if (s.status === "error") return `raised ${s.error.type}: ${s.error.message}`;
  return "skipped (an earlier step failed)";
}

function judgeConverged(s: ScenarioStep, what: string): Judged {
  if (s.status !== "ok" || !Converged(s.value)) return ["fails", describeStep(s)];
  const v = s.value;
  if (!v.agreed) return ["fails", `${what} still not true after ${v.after_ms} ms`];
  if (v.at_once) return ["ok", `${what} at once`];
  return ["differs", `${what} only after ${v.after_ms} ms`, REASONS.listLag];
}

/** The verdict for one step: what a user's script relies on, as e2b cloud behaves. */
export function judgeStep(s: ScenarioStep): Judged {
  const ok = (cond: boolean, seen: string): Judged => (cond ? ["ok", seen] : ["fails", seen]);
  const v = s.status === "ok" ? (s.value as Record<string, unknown> | string | boolean | null) : undefined;
  const seen = describeStep(s);
  switch (s.call) {
    case "Sandbox.create":
      return ok(typeof (v as { sandbox_id?: unknown } | undefined)?.sandbox_id === "string", seen);
    case "commands.run": {
      const r = v as { stdout?: unknown; exit_code?: unknown } | undefined;
      return ok(r?.stdout === "hello\n" && r.exit_code === 0, seen);
    }
    case "files.write":
      return ok(v === FILE_PATH, seen);
    case "files.read":
      return ok(v === FILE_TEXT, seen);
    case "set_timeout":
      return ok(s.status === "ok", seen);
    case "get_info": {
      const r = v as { state?: unknown; seconds_left?: unknown } | undefined;
      // set_timeout(120) just before: the end moved to about two minutes from now.
      const left = typeof r?.seconds_left === "number" ? r.seconds_left : -1;
      return ok(r?.state === "running" && left >= 100 && left <= 121, seen);
    }
    case "Sandbox.list":
      return judgeConverged(s, "the new sandbox listed");
    case "kill":
      return ok(v === true, seen);
    case "Sandbox.list after kill":
      return judgeConverged(s, "the killed sandbox gone from the list");
    case "Sandbox.get_info after kill":
      return ok(s.status === "error" && s.error.type === "SandboxNotFoundException", seen);
    default:
      return judgeCall(s, seen);
  }
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** The calls of tests/e2e/python/calls.py. */
function judgeCall(s: ScenarioStep, seen: string): Judged {
  const ok = (cond: boolean): Judged => (cond ? ["ok", seen] : ["fails", seen]);
  const v = s.status === "ok" ? s.value : undefined;
  const r = (v ?? {}) as Record<string, unknown>;
  const out = typeof r.stdout === "string" ? r.stdout : undefined;
  const uid = (expected: string): Judged => (out === expected ? ["ok", seen] : out !== undefined && /^\d+\n$/.test(out) ? ["differs", seen, REASONS.guestUser] : ["fails", seen]);
  switch (s.call) {
    case "Sandbox.create(metadata, envs)":
      return ok(typeof r.sandbox_id === "string");
    case "commands.run(env from create)":
      return ok(out === "yes\n");
    case "commands.run(pwd)":
      return out === "/home/user\n" ? ["ok", seen] : out?.endsWith("/home/user\n") ? ["differs", seen, REASONS.guestPaths] : ["fails", seen];
    case "commands.run(cwd=/tmp)":
      if (out === "/tmp\n") return ["ok", seen];
      return s.status === "error" && s.error.type === "SandboxException" && s.error.message.includes("cwd") ? ["differs", seen, REASONS.guestPaths] : ["fails", seen];
    case "commands.run(id -u)":
      return uid("1000\n");
    case "commands.run(user=root)":
      return uid("0\n");
    case "commands.run(exit 3)":
      return ok(same(v, { type: "CommandExitException", exit_code: 3, stderr: "warn\n" }));
    case "commands.run(on_stdout)":
      return ok(v === "1\n2\n3\n");
    case "commands.run(background) / list / kill":
      return ok(same(v, { listed: true, killed: true, gone: true }));
    case "commands.run(timeout=1)":
      return ok(same(v, { type: "TimeoutException" }));
    case "commands.send_stdin / close_stdin":
      return ok(v === "typed\n");
    case "commands.stream_input":
      return ok(v === "one\ntwo\nthree\n");
    case "files.write/make_dir/rename/exists/list/get_info/remove":
      return ok(same(v, { made: true, old_exists: false, new_exists: true, entries: [["sub", "dir"], ["b.txt", "file"]], size: 5, gone: true }));
    case "files.write_files":
      return ok(same(v, { paths: ["/home/user/batch/one.txt", "/home/user/batch/two.txt"], two: "2" }));
    case "files.write/read bytes (4 MiB)":
      return ok(same(v, { same: true, sha_in_sandbox_matches: true }));
    case "files.watch_dir":
      return ok(v === true);
    case "get_host":
      return ok(typeof r.host === "string" && r.host.startsWith(`3000-${String(r.sandbox_id)}.`));
    case "get_metrics":
      return ok(typeof r.count === "number" && r.count >= 1 && typeof r.cpu_count === "number" && r.cpu_count > 0);
    case "Sandbox.list(metadata filter)":
    case "Sandbox.list(state=running)":
      return judgeConverged(s, "the new sandbox listed");
    case "pause":
    case "is_running":
    case "Sandbox.kill(id)":
    case "cleanup kill":
      return ok(v === true);
    case "Sandbox.get_info after pause":
      return ok(v === "paused");
    case "Sandbox.connect (resume)":
      return ok(same(v, { state: "running", kept: "kept\n" }));
    case "is_running after kill":
      return ok(v === false);
    case "Sandbox.kill(id) again":
      return v === false ? ["ok", seen] : v === true ? ["differs", seen, REASONS.killAgain] : ["fails", seen];
    case "Sandbox.create(idempotency_key) twice":
      return same(v, { same: true }) ? ["ok", seen] : same(v, { same: false }) ? ["differs", seen, REASONS.idempotency] : ["fails", seen];
    default:
      return ["fails", `no expectation for ${s.call}: ${seen}`];
  }
}

export interface WireSeen {
  requested: "1.1" | "2";
  /** Whether the client reached the stack through a TLS edge (./wire-tap.ts with `tls`). */
  tls: boolean;
  api: WireProtocol[];
  sandbox: WireProtocol[];
}

const counted = (seen: WireProtocol[]) =>
  Object.entries(seen.reduce<Record<string, number>>((m, p) => ((m[p] = (m[p] ?? 0) + 1), m), {}))
    .map(([p, n]) => `${n} × ${p}`)
    .join(", ") || "none";

/** The pseudo-call for what went over the wire: every connection the SDK opened, on the API and the sandbox URL. */
export function judgeWire(w: WireSeen): Judged {
  const all = [...w.api, ...w.sandbox];
  const detail = `API: ${counted(w.api)}; sandbox URL: ${counted(w.sandbox)}`;
  if (all.length === 0 || all.includes("other")) return ["fails", detail];
  if (w.tls) {
    // The edge offers the API only http/1.1 (the REST port has no h2c); files.read is HTTP/1.1 by the SDK's choice.
    const apiOk = w.api.every((p) => p === "http/1.1 (TLS)");
    const sandboxOk = w.sandbox.every((p) => p === "h2 (TLS)" || p === "http/1.1 (TLS)");
    const h2 = w.sandbox.includes("h2 (TLS)");
    return apiOk && sandboxOk && (w.requested === "2" ? h2 : !h2) ? ["ok", detail] : ["fails", detail];
  }
  if (w.requested === "1.1") return all.every((p) => p === "http/1.1") ? ["ok", detail] : ["fails", detail];
  if (all.every((p) => p === "h2c")) return ["ok", detail];
  return all.every((p) => p === "http/1.1") ? ["differs", detail, REASONS.plainHttp] : ["fails", detail];
}

export function cellsFor(stack: string, variant: string, rec: ScenarioRecord, wire: WireSeen): Cell[] {
  const cell = (call: string, [verdict, detail, reason]: Judged): Cell => ({ stack, variant, call, verdict, detail, ...(reason ? { reason } : {}) });
  return [...rec.steps.map((s) => cell(s.call, judgeStep(s))), cell("HTTP version on the wire", judgeWire(wire))];
}

