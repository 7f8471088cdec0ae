// A node that refuses the fleet root token (401/403: a rotated token, a misconfigured node) is the operator's
// fault, not the tenant's: every sandbox route answers 500 with the route's fixed message, never the node's status
// or its words (which may name the node, its address or the token). Also: a fork count of 0 is a 400 that reaches
// no node. sandbox-e2b runs in-process on one simulated sandboxd node (development substrate).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { KEY_A, startStack, type Stack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ pools: ["img:1/none/small=4"] });
});
afterAll(() => s.stop());

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const r = await fetch(`${s.apiUrl}${path}`, {
    method,
    headers: { "content-type": "application/json", "x-api-key": KEY_A },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: r.status, text: await r.text() };
}
const node = () => s.cluster.nodes[0]!;
const raw = (id: string) => id.replace(/^sb-/, "sb_");
const NODE_WORDS = "unauthorized: root token rejected by node vk-node-7 (10.1.2.3:7777)";

describe("a node's 401/403 reaches the tenant as a 500 naming no node detail", () => {
  const cases: Array<[string, string, string, string, unknown?]> = [
    ["get", "GET", "", "failed to read the sandbox"],
    ["renew", "POST", "/timeout", "failed to extend the sandbox lease", { timeout: 60 }],
    ["hibernate", "POST", "/pause", "failed to pause the sandbox"],
    ["fork", "POST", "/fork", "failed to fork the sandbox", { count: 1 }],
    ["checkpoint", "POST", "/snapshots", "failed to snapshot the sandbox", {}],
    ["release", "DELETE", "", "failed to release the sandbox"],
  ];
  for (const status of [401, 403]) {
    for (const [route, method, suffix, message, body] of cases) {
      test(`${status} on ${route} => ${method} /sandboxes/{id}${suffix} is 500 "${message}"`, async () => {
        const created = await api("POST", "/v2/sandboxes", { templateID: "base" });
        expect(created.status).toBe(201);
        const id: string = JSON.parse(created.text).sandboxID;
        // The sandbox's own reads still work (the route's locate may read it first); only `route` is refused.
        node().fail(route as Parameters<ReturnType<typeof node>["fail"]>[0], status, { error: NODE_WORDS }, 10, raw(id));
        try {
          const r = await api(method, `/sandboxes/${id}${suffix}`, body);
          expect(r.status).toBe(500);
          expect(JSON.parse(r.text)).toEqual({ code: 500, message, error_code: "internal_server_error" });
          for (const leak of ["vk-node-7", "10.1.2.3", "unauthorized", "token", node().addr]) expect(r.text).not.toContain(leak);
        } finally {
          node().clearFaults();
        }
      });
    }
  }
});

describe("fork count", () => {
  test("0 and negative counts are a 400 naming the bound, and no fork reaches the node", async () => {
    const id: string = JSON.parse((await api("POST", "/v2/sandboxes", { templateID: "base" })).text).sandboxID;
    const forks = () => node().requests.filter((e) => e.route === "fork").length;
    const before = forks();
    for (const count of [0, -1]) {
      const r = await api("POST", `/sandboxes/${id}/fork`, { count });
      expect([count, r.status]).toEqual([count, 400]);
      expect(JSON.parse(r.text).message).toContain("count");
    }
    expect(forks()).toBe(before);
    // The default (no count) forks one.
    const one = await api("POST", `/sandboxes/${id}/fork`, {});
    expect(one.status).toBe(201);
    expect(JSON.parse(one.text)).toHaveLength(1);
  });
});
