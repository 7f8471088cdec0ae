// Idempotent create (issue 20 part 4) against sandbox-e2b and simulated nodes, counted on the node: a retried create
// with one Idempotency-Key returns the same sandbox (sequential, concurrent, and on another replica once the fleet
// view lists the stamped claim); the same key with another body is 409; a malformed key is 400; the stamp never
// shows in the sandbox's metadata. The stock Python SDK 2.63's own retry path (503 on the first attempt, after the
// create happened) ends with one sandbox, not two.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { createE2bApp } from "#shared/e2b/app.ts";
import { E2bSurface } from "#shared/e2b/surface.ts";
import { IDEMPOTENCY_METADATA_KEY } from "#shared/e2b/idempotency.ts";
import { createLogger } from "#shared/log/index.ts";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";
import { run } from "#tests/support/run.ts";
import { until } from "#tests/support/wait.ts";
import { DOMAIN, KEY_A, ROOT, SECRET, sdkOpts, startStack, type Stack } from "./harness.ts";

let s: Stack;
const servers: ReturnType<typeof Bun.serve>[] = [];
beforeAll(async () => {
  s = await startStack();
});
afterAll(async () => {
  for (const srv of servers) srv.stop(true);
  await s.stop();
});

const claims = () => s.cluster.nodes.flatMap((n) => n.claims());
const post = (url: string, body: unknown, key?: string) =>
  fetch(`${url}/v2/sandboxes`, {
    method: "POST",
    headers: { "x-api-key": KEY_A, "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) },
    body: JSON.stringify(body),
  });

describe("Idempotency-Key on create", () => {
  test("a sequential retry returns the same sandbox (one claim on the node); another body is 409", async () => {
    const before = claims().length;
    const first = await post(s.apiUrl, { templateID: "base", metadata: { job: "7" } }, "retry-1");
    expect(first.status).toBe(201);
    const a = await first.json();
    const again = await post(s.apiUrl, { metadata: { job: "7" }, templateID: "base" }, "retry-1");
    expect(again.status).toBe(201);
    const b = await again.json();
    expect(b.sandboxID).toBe(a.sandboxID);
    expect(b.envdAccessToken).toBe(a.envdAccessToken);
    expect(claims().length).toBe(before + 1);
    const other = await post(s.apiUrl, { templateID: "base", metadata: { job: "8" } }, "retry-1");
    expect(other.status).toBe(409);
    expect(await other.json()).toEqual({ code: 409, message: expect.stringContaining("retry-1"), error_code: "idempotency_request_mismatch" });
    expect(claims().length).toBe(before + 1);
    // The stamp is the surface's: not in what the client reads back, and not settable by it.
    const info = await Sandbox.getInfo(a.sandboxID, sdkOpts(s));
    expect(info.metadata).toEqual({ job: "7" });
    const forged = await post(s.apiUrl, { templateID: "base", metadata: { "e2b-surface.idempotency": "x.y.z" } });
    expect(forged.status).toBe(400);
    await Sandbox.kill(a.sandboxID, sdkOpts(s));
    // Once the first sandbox is gone, the key makes a new one.
    const after = await post(s.apiUrl, { templateID: "base", metadata: { job: "7" } }, "retry-1");
    expect(after.status).toBe(201);
    const c = await after.json();
    expect(c.sandboxID).not.toBe(a.sandboxID);
    await Sandbox.kill(c.sandboxID, sdkOpts(s));
  });

  test("concurrent retries on one replica make one sandbox", async () => {
    const before = claims().length;
    const replies = await Promise.all([0, 1, 2, 3].map(() => post(s.apiUrl, { templateID: "base" }, "burst-1")));
    expect(replies.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    const ids = new Set((await Promise.all(replies.map((r) => r.json()))).map((b) => b.sandboxID));
    expect(ids.size).toBe(1);
    expect(claims().length).toBe(before + 1);
    await Sandbox.kill([...ids][0]!, sdkOpts(s));
  });

  test("malformed keys are 400 before anything is claimed", async () => {
    const before = claims().length;
    for (const key of ["", "UPPER", "has_underscore", "a".repeat(256), "dot.ted"]) {
      const r = await post(s.apiUrl, { templateID: "base" }, key);
      expect(r.status).toBe(400);
      expect(await r.json()).toEqual({ code: 400, message: expect.stringContaining("Idempotency-Key") });
    }
    expect((await post(s.apiUrl, { templateID: "base" }, "a".repeat(255))).status).toBe(201);
    expect(claims().length).toBe(before + 1);
    await Sandbox.kill(claims().at(-1)!.id.replace("sb_", "sb-"), sdkOpts(s));
  });

  test("another replica answers a retry with the same sandbox once its fleet view lists the stamped claim", async () => {
    const first = await (await post(s.apiUrl, { templateID: "base" }, "cross-1")).json();
    const claimId = first.sandboxID.replace(/^sb-/, "sb_");
    await until(() => s.mesh.fleet.nodes().some((n) => n.entries.some((e) => e.id === claimId)), "the mesh view to list the claim", 10_000, 25);
    const log = createLogger({ level: "error", name: "test" });
    const surface = new E2bSurface(
      { namespace: "team-a", domain: DOMAIN, envdVersion: "0.8.0", defaultTimeoutSeconds: 300, aliases: new Map([["base", { image: "img:1", size: "small" as const }]]), envdSecret: SECRET, rootToken: ROOT },
      { fleet: s.mesh.fleet, log },
    );
    const app = createE2bApp({ surface, keys: new Map([[KEY_A, "team-a"]]), defaultNamespace: "team-a", log });
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, development: false, fetch: (r) => app.fetch(r) });
    servers.push(server);
    const before = claims().length;
    const retry = await post(`http://127.0.0.1:${server.port}`, { templateID: "base" }, "cross-1");
    expect(retry.status).toBe(201);
    const b = await retry.json();
    expect(b.sandboxID).toBe(first.sandboxID);
    expect(b.envdAccessToken).toBe(first.envdAccessToken);
    expect(claims().length).toBe(before);
    await Sandbox.kill(first.sandboxID, sdkOpts(s));
  });

  test("the Python SDK 2.63 retries a 503 with its Idempotency-Key: one sandbox, the one the first attempt made", async () => {
    // A front that lets the first create through to the surface, then loses its answer (503): a retryable status.
    let firstMade: string | undefined;
    let creates = 0;
    const front = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      development: false,
      async fetch(req) {
        const url = new URL(req.url);
        const upstream = await fetch(`${s.apiUrl}${url.pathname}${url.search}`, { method: req.method, headers: req.headers, body: req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer() });
        if (req.method === "POST" && url.pathname === "/v2/sandboxes" && creates++ === 0) {
          firstMade = (await upstream.json()).sandboxID;
          return Response.json({ code: 503, message: "injected: the answer was lost" }, { status: 503 });
        }
        return upstream;
      },
    });
    servers.push(front);
    const dir = mkdtempSync(join(tmpdir(), "e2b-idem-"));
    try {
      const script = join(dir, "create.py");
      writeFileSync(
        script,
        [
          "import json",
          "from e2b import Sandbox",
          "sbx = Sandbox.create('base', idempotency_key='py-retry-1', request_timeout=30)",
          "print(json.dumps({'sandboxID': sbx.sandbox_id}))",
        ].join("\n"),
      );
      const before = claims().length;
      const { python } = await ensurePythonSdk();
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("E2B_")));
      Object.assign(env, { E2B_API_KEY: KEY_A, E2B_API_URL: `http://127.0.0.1:${front.port}`, E2B_DOMAIN: DOMAIN, E2B_HTTP_VERSION: "1.1", PYTHONUNBUFFERED: "1" });
      const r = await run([python, script], { env, timeoutMs: 60_000 });
      expect(r.code).toBe(0);
      const made = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
      expect(creates).toBe(2);
      expect(made.sandboxID).toBe(firstMade);
      expect(claims().length).toBe(before + 1);
      await Sandbox.kill(made.sandboxID, sdkOpts(s));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe("Idempotency-Key and fork children, which inherit the stamp (issue 31)", () => {
  test("once the fleet lists the children of a stamped sandbox, a retry of its create returns the original, never a child", async () => {
    const first = await post(s.apiUrl, { templateID: "base" }, "forked-1");
    expect(first.status).toBe(201);
    const a = await first.json();
    const forked = await fetch(`${s.apiUrl}/sandboxes/${a.sandboxID}/fork`, { method: "POST", headers: { "x-api-key": KEY_A, "content-type": "application/json" }, body: JSON.stringify({ count: 2 }) });
    expect(forked.status).toBe(201);
    const children = ((await forked.json()) as Array<{ sandbox: { sandboxID: string } }>).map((c) => c.sandbox.sandboxID.replace(/^sb-/, "sb_"));
    expect(children).toHaveLength(2);
    // The children carry the parent's stamp (claim metadata is inherited) and are newer: the retry must look past them.
    await until(() => children.every((id) => s.mesh.fleet.nodes().some((n) => n.entries.some((e) => e.id === id && e.metadata?.[IDEMPOTENCY_METADATA_KEY]))), "the view to list the stamped children", 10_000, 25);
    const before = claims().length;
    for (let i = 0; i < 2; i++) {
      const again = await post(s.apiUrl, { templateID: "base" }, "forked-1");
      expect(again.status).toBe(201);
      const b = await again.json();
      expect(b.sandboxID).toBe(a.sandboxID);
      expect(b.envdAccessToken).toBe(a.envdAccessToken);
    }
    expect(claims().length).toBe(before);
    for (const id of [a.sandboxID, ...children]) await Sandbox.kill(id.replace(/^sb_/, "sb-"), sdkOpts(s));
  });
});
