// Every operation of e2b's public API, walked against sandbox-e2b (issue 30 item 1; docs/e2b-routes.md): each one is
// served, or answered 501 `{code, message}` naming the request, e2b's operation and what to do instead, whatever its
// path parameters; never a 404 "no route", which the SDKs read as "no such sandbox / secret / volume". The operation
// list is docs/e2b-routes.md's table, read here, so the doc and the server cannot drift apart. Then the stock JS SDK
// (e2b 2.51) and Python SDK (e2b 2.63) make their Secret, Volume and volume-content calls and raise that message.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Secret, SecretError, SecretNotFoundError, Volume, VolumeError, VolumeNotFoundError, VolumePathNotFoundError } from "e2b";
import { startBuildStack } from "#tests/integration/e2b-builds/support.ts";
import { DOMAIN, KEY_A, sdkOpts, startStack, type Stack } from "#tests/integration/e2b/harness.ts";
import { REPO } from "#tests/e2e/stack/run-stack.ts";
import { ErrorRows } from "./matrix-rows.ts";
import { runRecordScript } from "./python-run.ts";

interface Operation {
  method: string;
  path: string;
  auth: string;
  here: "served" | "builds" | "501";
}

/** The table of docs/e2b-routes.md. */
function operations(): Operation[] {
  const doc = readFileSync(join(REPO, "docs", "e2b-routes.md"), "utf8");
  const out: Operation[] = [];
  for (const line of doc.split("\n")) {
    const m = /^\| (GET|POST|PUT|PATCH|DELETE) `([^`]+)` \| ([^|]+?) \| (served|builds|501) \|$/.exec(line);
    if (m) out.push({ method: m[1]!, path: m[2]!, auth: m[3]!, here: m[4] as Operation["here"] });
  }
  return out;
}

const OPS = operations();
// Path parameter values: plain, an id form, percent-encoded bytes, dots and dashes, one far over any name limit.
const PARAMS = ["abc", "sb-0000000000000bad", "%E2%9C%93%20x", "a.b-c_d", "x".repeat(400)];
const fill = (path: string, v: string) => path.replace(/\{\w+\}/g, v);

interface Answer {
  status: number;
  body: { code?: number; message?: string } | undefined;
}

async function call(base: string, method: string, path: string, headers: Record<string, string>): Promise<Answer> {
  const r = await fetch(`${base}${path}`, { method, headers: { ...headers, ...(method === "GET" ? {} : { "content-type": "application/json" }) }, ...(method === "GET" ? {} : { body: "{}" }) });
  const text = await r.text();
  let body: Answer["body"];
  try {
    body = text ? (JSON.parse(text) as Answer["body"]) : undefined;
  } catch {
    body = undefined;
  }
  return { status: r.status, body };
}

const key = { "x-api-key": KEY_A };
const said = (op: Operation, concrete: string, a: Answer) => `${op.method} ${concrete.slice(0, 80)} (${op.path}): ${a.status} ${String(JSON.stringify(a.body)).slice(0, 300)}`;

/** The answer of an unserved route: 501, the envelope, the request and e2b's operation named, advice given. */
function expectRefusal(op: Operation, concrete: string, a: Answer): void {
  const where = said(op, concrete, a);
  expect(a.status, where).toBe(501);
  expect(a.body?.code, where).toBe(501);
  const message = a.body?.message ?? "";
  expect(message.startsWith(`${op.method} ${concrete.slice(0, 100)}`), where).toBe(true);
  expect(message, where).toContain(`e2b's ${op.method} ${op.path}`);
  expect(message, where).toContain("is not served by this server; ");
  // The echoed request is bounded: a 400-character parameter does not come back whole.
  expect(message.length, where).toBeLessThan(700);
}

/** The answer of a served route: anything but a 501, a missing key or a 404 "no route". */
function expectServed(op: Operation, concrete: string, a: Answer): void {
  const where = said(op, concrete, a);
  expect(a.status, where).not.toBe(501);
  expect(a.status, where).not.toBe(401);
  if (a.status === 404) expect(a.body?.message ?? "", where).not.toStartWith("no route");
}

function walk(name: string, builds: boolean, stack: () => Stack): void {
  test(`${name}: every operation with a key, for every path parameter value`, async () => {
    let refused = 0;
    let served = 0;
    for (const op of OPS) {
      const expected = op.here === "builds" ? (builds ? "served" : "501") : op.here;
      for (const v of op.path.includes("{") ? PARAMS : [""]) {
        const concrete = fill(op.path, v);
        const a = await call(stack().apiUrl, op.method, concrete, key);
        if (expected === "501") {
          expectRefusal(op, concrete, a);
          refused++;
        } else {
          expectServed(op, concrete, a);
          served++;
        }
      }
    }
    console.log(`${name}: ${OPS.length} operations, ${served} served answers, ${refused} refusals`);
  }, 120_000);

  test(`${name}: without our key, an X-API-Key route answers 401; a route e2b guards with a credential we never issue answers its 501`, async () => {
    for (const op of OPS) {
      const expected = op.here === "builds" ? (builds ? "served" : "501") : op.here;
      const concrete = fill(op.path, "abc");
      for (const headers of [{}, { authorization: "Bearer a-volume-or-dashboard-token" }] as Record<string, string>[]) {
        const a = await call(stack().apiUrl, op.method, concrete, headers);
        if (op.path === "/health") expect(a.status).toBe(204);
        else if (op.auth === "API key") expect(a.status, said(op, concrete, a)).toBe(401);
        else if (expected === "501") expectRefusal(op, concrete, a);
        else throw new Error(`${op.method} ${op.path}: a served route e2b guards with "${op.auth}"`);
      }
    }
  }, 60_000);
}

/** The SDKs' calls on routes this server does not serve: the JS name, the Python name, e2b's operation. */
const SDK_CALLS: ReadonlyArray<{ js: string; py: string; op: string }> = [
  { js: "Secret.create", py: "Secret.create", op: "POST /secrets" },
  { js: "Secret.getInfo", py: "Secret.get_info", op: "GET /secrets/{secretID}" },
  { js: "Secret.update", py: "Secret.update", op: "POST /secrets/{secretID}" },
  { js: "Secret.exists", py: "Secret.exists", op: "GET /secrets/{secretID}" },
  { js: "Secret.destroy", py: "Secret.destroy", op: "DELETE /secrets/{secretID}" },
  { js: "Secret.list", py: "Secret.list", op: "GET /secrets" },
  { js: "Volume.create", py: "Volume.create", op: "POST /volumes" },
  { js: "Volume.getInfo", py: "Volume.get_info", op: "GET /volumes/{volumeID}" },
  { js: "Volume.connect", py: "Volume.connect", op: "GET /volumes/{volumeID}" },
  { js: "Volume.list", py: "Volume.list", op: "GET /volumes" },
  { js: "Volume.destroy", py: "Volume.destroy", op: "DELETE /volumes/{volumeID}" },
  { js: "volume.list", py: "volume.list", op: "GET /volumecontent/{volumeID}/dir" },
  { js: "volume.makeDir", py: "volume.make_dir", op: "POST /volumecontent/{volumeID}/dir" },
  { js: "volume.getInfo", py: "volume.get_info", op: "GET /volumecontent/{volumeID}/path" },
  { js: "volume.exists", py: "volume.exists", op: "GET /volumecontent/{volumeID}/path" },
  { js: "volume.updateMetadata", py: "volume.update_metadata", op: "PATCH /volumecontent/{volumeID}/path" },
  { js: "volume.readFile", py: "volume.read_file", op: "GET /volumecontent/{volumeID}/file" },
  { js: "volume.writeFile", py: "volume.write_file", op: "PUT /volumecontent/{volumeID}/file" },
  { js: "volume.remove", py: "volume.remove", op: "DELETE /volumecontent/{volumeID}/path" },
];
const rowName = (c: { js: string; py: string }) => (c.js === c.py ? c.js : `${c.js} / ${c.py}`);
const reasonFor = (c: { op: string }, raised: string) =>
  `${c.op.includes("/secrets") ? "secrets are not stored here (secret injection is the node's guarded-egress policy, set by the operator)" : "volumes are not offered (a sandbox's files live on its own disk; snapshots keep them)"}: the route answers 501 naming it and what to do instead (docs/e2b-routes.md), which the SDK raises as ${raised}, not a not-found`;

const JS = "e2b (JS) 2.51";
const PY = "e2b (Python) 2.63";
const rows = new ErrorRows(
  "errors-unserved-mesh",
  "Routes not served here: e2b (JS) 2.51 and e2b (Python) 2.63 on sandbox-e2b",
  "The stock SDKs' Secret, Volume and volume-content calls (volume content on the API host with a volume's Bearer token, " +
    "no API key), each answered 501 naming the request, e2b's operation and what to do instead (issue 30 item 1; " +
    "docs/e2b-routes.md). Suite: tests/e2e/errors/unserved.test.ts (the Python calls: tests/e2e/errors/unserved.py).",
  "sandbox-e2b mesh (tests/integration/e2b/harness.ts)",
  2,
);
afterAll(() => rows.write());

describe("docs/e2b-routes.md", () => {
  test("lists e2b's whole public API: 73 operations, each once", () => {
    // 64 in e2b's spec snapshot, 2 the newest SDKs add (v2 create and connect), 7 volume-content routes.
    expect(OPS).toHaveLength(73);
    expect(new Set(OPS.map((o) => `${o.method} ${o.path}`)).size).toBe(73);
    expect(OPS.filter((o) => o.path.startsWith("/volumecontent/"))).toHaveLength(7);
  });
});

describe("sandbox-e2b, builds off", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({});
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });
  walk("builds off", false, () => s);

  test("any other method or path under an unserved family is refused in words too; an unknown route stays a 404", async () => {
    for (const [method, path, family] of [
      ["PATCH", "/secrets/sec-1", "/secrets"],
      ["PUT", "/secrets/sec-1/versions/2", "/secrets"],
      ["POST", "/volumes/vol-1/snapshot", "/volumes"],
      ["GET", "/volumecontent/vol-1/other?path=/", "/volumecontent"],
      ["DELETE", "/teams/t1", "/teams"],
      ["GET", "/admin/anything", "/admin"],
    ] as const) {
      const a = await call(s.apiUrl, method, path, key);
      expect(a.status, `${method} ${path}`).toBe(501);
      expect(a.body?.message ?? "").toStartWith(`${method} ${path.split("?")[0]}: `);
      expect(a.body?.message ?? "").toContain(`e2b's ${family} routes`);
    }
    // A literal served route under an unserved pattern stays served: POST /templates/{templateID} is unserved,
    // POST /templates/tags is not (an empty body is its 400).
    expect((await call(s.apiUrl, "POST", "/templates/tags", key)).status).toBe(400);
    const unknown = await call(s.apiUrl, "GET", "/nothing/here", key);
    expect(unknown).toEqual({ status: 404, body: { code: 404, message: "no route GET /nothing/here" } });
  });

  test("the stock JS SDK raises the 501's message for every Secret and Volume call, not a not-found", async () => {
    const o = sdkOpts(s);
    const volumeApi = { apiUrl: s.apiUrl, requestTimeoutMs: 10_000 };
    const vol = new Volume("vol-1", "data", "a-volume-token", DOMAIN);
    const js: Record<string, () => Promise<unknown>> = {
      "Secret.create": () => Secret.create("db-password", "hunter2", o),
      "Secret.getInfo": () => Secret.getInfo("sec-1", o),
      "Secret.update": () => Secret.update("sec-1", "hunter3", o),
      "Secret.exists": () => Secret.exists("sec-1", o),
      "Secret.destroy": () => Secret.destroy("sec-1", o),
      "Secret.list": () => Secret.list(o).nextItems(),
      "Volume.create": () => Volume.create("data", o),
      "Volume.getInfo": () => Volume.getInfo("vol-1", o),
      "Volume.connect": () => Volume.connect("vol-1", o),
      "Volume.list": () => Volume.list(o),
      "Volume.destroy": () => Volume.destroy("vol-1", o),
      "volume.list": () => vol.list("/", volumeApi),
      "volume.makeDir": () => vol.makeDir("/d", volumeApi),
      "volume.getInfo": () => vol.getInfo("/d", volumeApi),
      "volume.exists": () => vol.exists("/d", volumeApi),
      "volume.updateMetadata": () => vol.updateMetadata("/d", { mode: 0o755 }, volumeApi),
      "volume.readFile": () => vol.readFile("/d/f", volumeApi),
      "volume.writeFile": () => vol.writeFile("/d/f", "x", volumeApi),
      "volume.remove": () => vol.remove("/d", volumeApi),
    };
    expect(Object.keys(js).sort()).toEqual(SDK_CALLS.map((c) => c.js).sort());
    for (const c of SDK_CALLS) {
      const err = await js[c.js]!().then(
        (v) => new Error(`${c.js} returned ${JSON.stringify(v)}`),
        (e: unknown) => e as Error,
      );
      const cls = c.op.includes("/secrets") ? SecretError : VolumeError;
      expect(err, c.js).toBeInstanceOf(cls);
      for (const notFound of [SecretNotFoundError, VolumeNotFoundError, VolumePathNotFoundError]) expect(err, c.js).not.toBeInstanceOf(notFound);
      expect(err.message, c.js).toStartWith("501: ");
      expect(err.message, c.js).toContain(`(e2b's ${c.op})`);
      expect(err.message, c.js).toContain(c.op.includes("/secrets") ? "secrets are not stored here" : "volumes are not offered");
      rows.differs("js", JS, rowName(c), `${err.constructor.name}: ${err.message.slice(0, 120)}`, reasonFor(c, `${cls.name} "501: <message>"`));
    }
  }, 60_000);

  test("the stock Python SDK raises SecretException / VolumeException with the 501's message for the same calls", async () => {
    const out = await runRecordScript("unserved.py", { E2B_API_KEY: KEY_A, E2B_API_URL: s.apiUrl, E2B_DOMAIN: DOMAIN, E2B_VOLUME_API_URL: s.apiUrl });
    expect(Object.keys(out).sort()).toEqual(SDK_CALLS.map((c) => c.py).sort());
    for (const c of SDK_CALLS) {
      const o = out[c.py]!;
      if (!("raised" in o)) throw new Error(`${c.py} returned ${JSON.stringify(o.returned)} instead of raising`);
      const cls = c.op.includes("/secrets") ? "SecretException" : "VolumeException";
      expect(o.mro, `${c.py}: ${o.raised}: ${o.message}`).toContain(cls);
      expect(o.mro.some((k) => k.includes("NotFound")), `${c.py}: ${o.raised}`).toBe(false);
      expect(o.message, c.py).toContain(`(e2b's ${c.op})`);
      expect(o.message, c.py).toContain("is not served by this server");
      rows.differs("python", PY, rowName(c), `${o.raised}: ${o.message.slice(0, 120)}`, reasonFor(c, `${cls} "501: <message>"`));
    }
  }, 180_000);
});

describe("sandbox-e2b, builds on (--e2b-builds)", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startBuildStack({});
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });
  walk("builds on", true, () => s);
});
