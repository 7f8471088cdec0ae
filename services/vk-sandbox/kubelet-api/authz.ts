// What a kubelet API request needs, as a kubelet with `--authorization-mode=Webhook` asks it: a SubjectAccessReview
// on the Node object named after this node, subresource by path (the kubelet's own table: /stats → nodes/stats,
// /metrics → nodes/metrics, /logs → nodes/log, /spec → nodes/spec, /checkpoint → nodes/checkpoint, everything else,
// /pods, /runningpods, /containerLogs, /exec … included, → nodes/proxy), verb by HTTP method.
import type { AccessAttributes, AccessVerdict, ReviewedUser } from "#shared/kube/index.ts";

const SUBRESOURCES: readonly [prefix: string, subresource: string][] = [
  ["/stats", "stats"],
  ["/metrics", "metrics"],
  ["/logs", "log"],
  ["/spec", "spec"],
  ["/checkpoint", "checkpoint"],
];

const VERBS: Record<string, string> = { GET: "get", HEAD: "get", POST: "create", PUT: "update", PATCH: "patch", DELETE: "delete" };

/** The path itself or anything under it (`/metricsfoo` is not under `/metrics`). */
const isSubpath = (path: string, prefix: string) => path === prefix || path.startsWith(`${prefix}/`);

export interface KubeletAttributes {
  verb: string;
  group: "";
  version: "v1";
  resource: "nodes";
  subresource: string;
  name: string;
}

export function kubeletAttributes(method: string, path: string, nodeName: string): KubeletAttributes {
  const sub = SUBRESOURCES.find(([prefix]) => isSubpath(path, prefix))?.[1] ?? "proxy";
  // A method the kubelet has no verb for is reviewed under its own name, which no role grants unless it says "*".
  return { verb: VERBS[method] ?? method.toLowerCase(), group: "", version: "v1", resource: "nodes", subresource: sub, name: nodeName };
}

export interface AccessReview {
  review(user: ReviewedUser, attributes: AccessAttributes): Promise<AccessVerdict>;
}

export class KubeletAuthorizer {
  constructor(
    private readonly access: AccessReview,
    private readonly nodeName: string,
  ) {}

  async authorize(user: ReviewedUser, method: string, path: string): Promise<AccessVerdict & { attributes: KubeletAttributes }> {
    const attributes = kubeletAttributes(method, path, this.nodeName);
    const verdict = await this.access.review(user, { resourceAttributes: attributes });
    return { ...verdict, attributes };
  }
}
