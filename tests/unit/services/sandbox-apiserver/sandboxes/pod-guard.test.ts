// The Pod guard of the aggregated API's mutations (issue 22 case 3): which sandboxes count as Pod-backed, which pod
// permission each action needs, and that every failure to tell is a refusal.
import { describe, expect, test } from "bun:test";
import { ApiError } from "#services/sandbox-apiserver/api/index.ts";
import { type Caller, POD_PERMISSION, type PodAction, PodGuard, type PodGuardBackend, type Resolved } from "#services/sandbox-apiserver/sandboxes/index.ts";

const alice: Caller = { name: "alice", groups: ["system:authenticated"] };

function hit(claimMetadata?: Record<string, string>): Resolved {
  return {
    node: "n1",
    entry: { name: "team/web", id: "sb_1", phase: "Running", ...(claimMetadata ? { claimMetadata: JSON.stringify(claimMetadata) } : {}) },
    sandbox: { apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name: "web", namespace: "team" }, spec: {}, status: {} } as unknown as Resolved["sandbox"],
  };
}

interface Review {
  caller: Caller;
  namespace: string;
  name: string;
  verb: string;
  subresource?: string;
}

function backend(o: { pod?: boolean | Error; allow?: boolean | Error }) {
  const reviews: Review[] = [];
  const podLookups: string[] = [];
  const b: PodGuardBackend = {
    async podExists(namespace, name) {
      podLookups.push(`${namespace}/${name}`);
      if (o.pod instanceof Error) throw o.pod;
      return o.pod ?? false;
    },
    async allowed(caller, namespace, name, p) {
      reviews.push({ caller, namespace, name, verb: p.verb, ...(p.subresource ? { subresource: p.subresource } : {}) });
      if (o.allow instanceof Error) throw o.allow;
      return o.allow ?? false;
    },
  };
  return { b, reviews, podLookups };
}

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error("expected a refusal");
}

const STAMP = { "vk-sandbox.node": "n1", "vk-sandbox.pod-uid": "uid-1", "vk-sandbox.authority": "uid-1" };

describe("which sandboxes are Pod-backed", () => {
  test("no stamp and no Pod of that name: any action passes without a review", async () => {
    const f = backend({ pod: false });
    expect(await new PodGuard(f.b).check(alice, "team", "web", hit(), "fork")).toBe(false);
    expect(f.podLookups).toEqual(["team/web"]);
    expect(f.reviews).toEqual([]);
  });

  test("vk-sandbox's Pod UID stamp in the claim metadata makes it Pod-backed without a Pod lookup", async () => {
    const f = backend({ allow: false });
    const e = await refusal(new PodGuard(f.b).check(alice, "team", "web", hit(STAMP), "fork"));
    expect(e.code).toBe(403);
    expect(f.podLookups).toEqual([]);
    expect(f.reviews).toHaveLength(1);
  });

  test("a Pod of that namespace and name makes it Pod-backed (live lookups and Go-daemon nodes carry no stamp)", async () => {
    const f = backend({ pod: true, allow: false });
    const e = await refusal(new PodGuard(f.b).check(alice, "team", "web", hit({ other: "x" }), "delete"));
    expect(e.code).toBe(403);
    expect(e.message).toContain("delete pods");
  });

  test("a Pod lookup that fails is a 503, not a pass", async () => {
    const f = backend({ pod: new Error("connection refused") });
    const e = await refusal(new PodGuard(f.b).check(alice, "team", "web", hit(), "pause"));
    expect(e.code).toBe(503);
    expect(f.reviews).toEqual([]);
  });
});

describe("the pod permission each action needs", () => {
  const expected: Record<PodAction, string> = {
    fork: "create pods/exec",
    snapshot: "create pods/exec",
    delete: "delete pods",
    pause: "update pods",
    resume: "update pods",
  };
  for (const action of Object.keys(expected) as PodAction[]) {
    test(`${action}: a review for ${expected[action]} on the Pod, as the caller; denied is a 403 naming it`, async () => {
      const f = backend({ allow: false });
      const e = await refusal(new PodGuard(f.b).check(alice, "team", "web", hit(STAMP), action));
      expect(e.code).toBe(403);
      expect(e.message).toContain(expected[action]);
      expect(e.message).toContain('User "alice"');
      expect(f.reviews).toEqual([{ caller: alice, namespace: "team", name: "web", ...POD_PERMISSION[action] }]);
    });
  }

  test("allowed: the action goes on", async () => {
    const f = backend({ allow: true });
    expect(await new PodGuard(f.b).check(alice, "team", "web", hit(STAMP), "fork")).toBe(true);
    expect(f.reviews).toHaveLength(1);
  });

  test("a review that fails is a refusal", async () => {
    const f = backend({ allow: new Error("503 from the authorizer") });
    const e = await refusal(new PodGuard(f.b).check(alice, "team", "web", hit(STAMP), "snapshot"));
    expect(e.code).toBe(403);
    expect(e.message).toContain("failed");
  });

  test("an unknown caller is refused; system:masters needs no review", async () => {
    const f = backend({ allow: true });
    expect((await refusal(new PodGuard(f.b).check(undefined, "team", "web", hit(STAMP), "fork"))).code).toBe(403);
    await new PodGuard(f.b).check({ name: "admin", groups: ["system:masters"] }, "team", "web", hit(STAMP), "fork");
    expect(f.reviews).toEqual([]);
  });
});
