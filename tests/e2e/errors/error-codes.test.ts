// e2b's machine-readable `error_code` on our error answers (issue 30 item 3; docs/e2b.md "Errors"): each refusal for
// which e2b cloud gives one carries e2b's value, checked on the wire against sandbox-e2b and simulated nodes, and,
// where a stock client reaches it, through the Python SDK e2b 2.63, which must raise what it raises against e2b cloud
// for the same answer (its exception follows the status; of these codes it reads none, its one branch on
// `error_code` being a snapshot whose guest agent did not answer, a state this server never produces).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { KEY_A, startStack, type Stack } from "#tests/integration/e2b/harness.ts";
import { ErrorRows } from "./matrix-rows.ts";
import { raised, runRecordScript } from "./python-run.ts";

const PY = "e2b (Python) 2.63";
const rows = new ErrorRows(
  "errors-codes-python-mesh",
  "error_code: e2b (Python) 2.63 on sandbox-e2b",
  "Error answers carrying e2b's `error_code` (issue 30 item 3; docs/e2b.md \"Errors\"), each with what the stock Python SDK " +
    "raises for it, judged against what it raises for e2b cloud's same answer. Suite: tests/e2e/errors/error-codes.test.ts " +
    "(tests/e2e/errors/error_codes.py).",
  "sandbox-e2b mesh (tests/integration/e2b/harness.ts)",
  3,
);

let s: Stack;
beforeAll(async () => {
  // `empty` names a pool with no warm sandbox: a create from it is the capacity refusal.
  s = await startStack({ pools: ["img:1/none/small=4", "img:2/none/small=0"], aliases: "base img:1\nempty img:2\n" });
}, 60_000);
afterAll(async () => {
  await s?.stop();
  rows.write();
});

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: { code: number; message: string; error_code?: string; sandboxID?: string } }> {
  const r = await fetch(`${s.apiUrl}${path}`, { method: "POST", headers: { "x-api-key": KEY_A, "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as { code: number; message: string; error_code?: string } };
}
const kill = (id: string) => fetch(`${s.apiUrl}/sandboxes/${id}`, { method: "DELETE", headers: { "x-api-key": KEY_A } });
const python = (code: string) => runRecordScript("error_codes.py", { CASE: code, E2B_API_KEY: KEY_A, E2B_API_URL: s.apiUrl, E2B_SANDBOX_URL: s.apiUrl, E2B_DOMAIN: "sandbox.test" });

describe("error_code on the wire, and what the Python SDK raises for it", () => {
  test("sandbox_capacity_unavailable: a create with no warm capacity (503); Python raises ServiceBusyException", async () => {
    const r = await post("/sandboxes", { templateID: "empty" });
    expect(r.status).toBe(503);
    expect(r.json).toMatchObject({ code: 503, error_code: "sandbox_capacity_unavailable" });
    const out = await python("sandbox_capacity_unavailable");
    const e = raised(out, "sandbox_capacity_unavailable");
    expect(e.raised).toBe("ServiceBusyException");
    expect(e.message).toContain("503: Service temporarily unavailable");
    rows.ok("capacity", PY, "Sandbox.create with no warm capacity: 503 sandbox_capacity_unavailable -> ServiceBusyException", "");
  }, 60_000);

  test("idempotency_request_mismatch: one Idempotency-Key, another body (409); Python raises SandboxException 409", async () => {
    const first = await post("/sandboxes", { templateID: "base", metadata: { try: "1" } }, { "idempotency-key": "wire-1" });
    expect(first.status).toBe(201);
    try {
      const other = await post("/sandboxes", { templateID: "base", metadata: { try: "2" } }, { "idempotency-key": "wire-1" });
      expect(other.status).toBe(409);
      expect(other.json).toMatchObject({ code: 409, error_code: "idempotency_request_mismatch" });
    } finally {
      await kill(first.json.sandboxID!);
    }
    const e = raised(await python("idempotency_request_mismatch"), "idempotency_request_mismatch");
    expect(e.mro).toContain("SandboxException");
    expect(e.message).toStartWith("409: ");
    expect(e.message).toContain("was used with a different request body");
    rows.ok("mismatch", PY, "Sandbox.create(idempotency_key) with another body: 409 idempotency_request_mismatch -> SandboxException", "");
  }, 60_000);

  test("sandbox_create_failed: the sandbox's envd /init fails after the claim (500); Python raises SandboxException 500", async () => {
    const was = s.guest.initStatus;
    s.guest.initStatus = 500;
    try {
      const r = await post("/sandboxes", { templateID: "base" });
      expect(r).toEqual({ status: 500, json: { code: 500, message: "failed to start the sandbox", error_code: "sandbox_create_failed" } });
      const e = raised(await python("sandbox_create_failed"), "sandbox_create_failed");
      expect(e.mro).toContain("SandboxException");
      expect(e.message).toBe("500: failed to start the sandbox");
      rows.ok("create-failed", PY, "Sandbox.create whose envd /init fails: 500 sandbox_create_failed -> SandboxException", "");
    } finally {
      s.guest.initStatus = was;
    }
  }, 60_000);

  test("sandbox_create_failed: a node's 500 on the claim itself", async () => {
    s.cluster.nodes[0]!.fail("claim", 500, { error: "disk full on vk-node-3" }, 1);
    try {
      const r = await post("/sandboxes", { templateID: "base" });
      expect(r).toEqual({ status: 500, json: { code: 500, message: "failed to claim a sandbox", error_code: "sandbox_create_failed" } });
    } finally {
      s.cluster.nodes[0]!.clearFaults();
    }
  });

  test("idempotency_outcome_unknown: a retry whose earlier sandbox cannot be read from its node (500)", async () => {
    const first = await post("/sandboxes", { templateID: "base" }, { "idempotency-key": "wire-2" });
    expect(first.status).toBe(201);
    const id = first.json.sandboxID!;
    // Every read of it fails (the client retries a failed GET).
    s.cluster.nodes[0]!.fail("get", 500, { error: "node busy" }, Infinity, id.replace(/^sb-/, "sb_"));
    try {
      const again = await post("/sandboxes", { templateID: "base" }, { "idempotency-key": "wire-2" });
      expect(again).toEqual({ status: 500, json: { code: 500, message: "failed to read the sandbox an earlier create with this Idempotency-Key made", error_code: "idempotency_outcome_unknown" } });
    } finally {
      s.cluster.nodes[0]!.clearFaults();
      await kill(id);
    }
  });

  test("internal_server_error: any other 500 (a node's 500 on fork)", async () => {
    const made = await post("/sandboxes", { templateID: "base" });
    expect(made.status).toBe(201);
    const id = made.json.sandboxID!;
    s.cluster.nodes[0]!.fail("fork", 500, { error: "boom" }, 1);
    try {
      const r = await post(`/sandboxes/${id}/fork`, {});
      expect(r).toEqual({ status: 500, json: { code: 500, message: "failed to fork the sandbox", error_code: "internal_server_error" } });
    } finally {
      s.cluster.nodes[0]!.clearFaults();
      await kill(id);
    }
  });

  test("answers with no e2b code carry none: a 404, a 400, a 501", async () => {
    const missing = await fetch(`${s.apiUrl}/sandboxes/sb-0000000000000bad`, { headers: { "x-api-key": KEY_A } });
    expect(Object.keys((await missing.json()) as object).sort()).toEqual(["code", "message"]);
    const bad = await post("/sandboxes", {});
    expect(bad.status).toBe(400);
    expect(bad.json.error_code).toBeUndefined();
    const unserved = await post("/secrets", { name: "n", value: "v" });
    expect(unserved.status).toBe(501);
    expect(unserved.json.error_code).toBeUndefined();
  });
});
