// The kubelet API's reviewers under an anonymous flood (docs/decisions.md "review-floods"): made-up bearer tokens
// spend at most the TokenReview bucket and are refused at once (401, "try again"), while the SubjectAccessReviews
// the kube-apiserver's own `kubectl logs/exec` need go through their own client, unqueued behind the flood.
import { describe, expect, test } from "bun:test";
import { kubeletDelegation } from "#services/vk-sandbox/kubelet-api/index.ts";
import { TOKEN_REVIEW_BURST } from "#shared/kube/index.ts";

function counting(answer: object) {
  const kinds: string[] = [];
  return {
    kinds,
    client: {
      async create<T>(_res: unknown, obj: object): Promise<T> {
        kinds.push((obj as { kind: string }).kind);
        return answer as T;
      },
    },
  };
}

describe("kubelet API delegation under a token flood", () => {
  test("10,000 made-up tokens make at most a bucket of TokenReviews, and an access review still goes out at once", async () => {
    const tokens = counting({ status: { authenticated: false } });
    const access = counting({ status: { allowed: true } });
    const { authenticator, authorizer } = kubeletDelegation({ tokens: tokens.client, access: access.client }, "node-a");
    const start = performance.now();
    const outcomes = await Promise.all(
      Array.from({ length: 10_000 }, () => authenticator.authenticate(new Headers({ Authorization: `Bearer ${crypto.randomUUID()}` }), undefined)),
    );
    expect(performance.now() - start).toBeLessThan(2_000); // refused at once, never queued
    expect(outcomes.every((o) => !o.ok)).toBe(true);
    expect(tokens.kinds.length).toBeLessThanOrEqual(TOKEN_REVIEW_BURST + 5);
    expect(tokens.kinds.every((k) => k === "TokenReview")).toBe(true);

    const apiserver = { name: "kube-apiserver-kubelet-client", groups: ["system:masters", "system:authenticated"] };
    const v = await authorizer.authorize(apiserver, "GET", "/containerLogs/ns/pod/c");
    expect(v.allowed).toBe(true);
    expect(access.kinds).toEqual(["SubjectAccessReview"]);
  });
});
