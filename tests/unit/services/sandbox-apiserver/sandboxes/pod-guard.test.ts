// The Pod guard of the aggregated API's mutations (issue 22 case 3): which sandboxes count as Pod-backed, which pod
// permission each action needs, and that every failure to tell is a refusal.
import { describe, expect, test } from "bun:test";
import { ApiError } from "#services/sandbox-apiserver/api/index.ts";
import { type Caller, type PodAction, PodGuard, type Resolved, kubePodGuardBackend } from "#services/sandbox-apiserver/sandboxes/index.ts";
import { KubeApiError, type KubeClient } from "#shared/kube/index.ts";

const alice: Caller = { name: "alice", groups: ["system:authenticated"] };

function hit(claimMetadata?: Record<string, string>): Resolved {
  return {
    node: "n1",
    entry: { name: "team/web", id: "sb_1", phase: "Running", ...(claimMetadata ? { claimMetadata: JSON.stringify(claimMetadata) } : {}) },
    sandbox: { apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name: "web", namespace: "team" }, spec: {}, status: {} } as unknown as Resolved["sandbox"],
  };
}

/** One pod permission granted to alice on Pod team/web (an RBAC rule narrowed to that Pod). */
interface Grant {
  verb: string;
  subresource?: string;
}

/** The SubjectAccessReview spec the guard sent, as the cluster receives it. */
interface ReviewSpec {
  user: string;
  groups: string[];
  resourceAttributes: Record<string, string>;
}

/**
 * The real backend (kubePodGuardBackend) over a fake cluster that answers like RBAC: a review is allowed only when
 * it asks, as alice, for exactly a granted permission on Pod team/web (group "", version v1, resource pods, the
 * grant's verb and subresource). So a guard that asks for the wrong thing (`create pods` for a fork, a dropped
 * subresource in the review body) is refused here, as the kube-apiserver would refuse it.
 */
function backend(o: { pod?: boolean | Error; grants?: Grant[]; review?: Error }) {
  const reviews: ReviewSpec[] = [];
  const podLookups: string[] = [];
  const cluster = {
    async get(_res: unknown, name: string, opts: { namespace?: string }) {
      podLookups.push(`${opts.namespace}/${name}`);
      if (o.pod instanceof Error) throw o.pod;
      if (o.pod) return { metadata: { name, namespace: opts.namespace } };
      throw new KubeApiError({ status: 404, verb: "get", path: `/api/v1/namespaces/${opts.namespace}/pods/${name}`, reason: "NotFound", message: `pods "${name}" not found` });
    },
    async create(_res: unknown, body: { spec: ReviewSpec }) {
      reviews.push(body.spec);
      if (o.review) throw o.review;
      const asked = body.spec.resourceAttributes;
      const allowed =
        body.spec.user === "alice" &&
        (o.grants ?? []).some((g) => {
          const want: Record<string, string> = { namespace: "team", verb: g.verb, group: "", version: "v1", resource: "pods", name: "web", ...(g.subresource ? { subresource: g.subresource } : {}) };
          return Object.keys(want).length === Object.keys(asked).length && Object.entries(want).every(([k, v]) => asked[k] === v);
        });
      return { status: { allowed } };
    },
  };
  return { b: kubePodGuardBackend(cluster as unknown as KubeClient), reviews, podLookups };
}

/** The review body the kube-apiserver must see for a pod permission on team/web, asked as alice. */
const reviewOf = (g: Grant): ReviewSpec => ({
  user: "alice",
  groups: ["system:authenticated"],
  resourceAttributes: { namespace: "team", verb: g.verb, group: "", version: "v1", resource: "pods", ...(g.subresource ? { subresource: g.subresource } : {}), name: "web" },
});

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
    const f = backend({});
    const e = await refusal(new PodGuard(f.b).check(alice, "team", "web", hit(STAMP), "fork"));
    expect(e.code).toBe(403);
    expect(f.podLookups).toEqual([]);
    expect(f.reviews).toHaveLength(1);
  });

  test("a Pod of that namespace and name makes it Pod-backed (live lookups and Go-daemon nodes carry no stamp)", async () => {
    const f = backend({ pod: true });
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
  /** The permission each action needs, written out (not read from the guard's own table). */
  const needs: Record<PodAction, Grant> = {
    fork: { verb: "create", subresource: "exec" },
    snapshot: { verb: "create", subresource: "exec" },
    delete: { verb: "delete" },
    pause: { verb: "update" },
    resume: { verb: "update" },
  };
  /** Every pod permission a neighbouring slip could ask for instead. */
  const neighbours: Grant[] = [{ verb: "create" }, { verb: "get", subresource: "exec" }, { verb: "create", subresource: "attach" }, { verb: "delete" }, { verb: "update" }, { verb: "patch" }, { verb: "create", subresource: "exec" }];
  for (const action of Object.keys(expected) as PodAction[]) {
    test(`${action}: a review for ${expected[action]} on the Pod, as the caller; denied is a 403 naming it`, async () => {
      const f = backend({});
      const e = await refusal(new PodGuard(f.b).check(alice, "team", "web", hit(STAMP), action));
      expect(e.code).toBe(403);
      expect(e.message).toContain(expected[action]);
      expect(e.message).toContain('User "alice"');
      expect(f.reviews).toEqual([reviewOf(needs[action])]);
    });

    test(`${action}: granted ${expected[action]} it goes on; granted every other pod permission but that one it is refused`, async () => {
      const granted = backend({ grants: [needs[action]] });
      expect(await new PodGuard(granted.b).check(alice, "team", "web", hit(STAMP), action)).toBe(true);
      expect(granted.reviews).toEqual([reviewOf(needs[action])]);
      const same = (g: Grant) => g.verb === needs[action].verb && g.subresource === needs[action].subresource;
      const others = backend({ grants: neighbours.filter((g) => !same(g)) });
      expect((await refusal(new PodGuard(others.b).check(alice, "team", "web", hit(STAMP), action))).code).toBe(403);
    });
  }

  test("allowed: the action goes on", async () => {
    const f = backend({ grants: [{ verb: "create", subresource: "exec" }] });
    expect(await new PodGuard(f.b).check(alice, "team", "web", hit(STAMP), "fork")).toBe(true);
    expect(f.reviews).toHaveLength(1);
  });

  test("a review that fails is a refusal", async () => {
    const f = backend({ review: new Error("503 from the authorizer") });
    const e = await refusal(new PodGuard(f.b).check(alice, "team", "web", hit(STAMP), "snapshot"));
    expect(e.code).toBe(403);
    expect(e.message).toContain("failed");
  });

  test("an unknown caller is refused; system:masters needs no review", async () => {
    const f = backend({ grants: [{ verb: "create", subresource: "exec" }] });
    expect((await refusal(new PodGuard(f.b).check(undefined, "team", "web", hit(STAMP), "fork"))).code).toBe(403);
    await new PodGuard(f.b).check({ name: "admin", groups: ["system:masters"] }, "team", "web", hit(STAMP), "fork");
    expect(f.reviews).toEqual([]);
  });
});
