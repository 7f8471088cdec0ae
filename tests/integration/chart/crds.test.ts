// One source for every CRD: manifests/crds links the chart's NodeInventory CRD (no copy that can drift), helm installs
// exactly that file, the README's kubectl steps apply them through the link, and the real kube-apiserver accepts the
// CRDs and the objects the project writes into them.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parse } from "yaml";
import { startKubeApiserver, type TestCluster } from "#tests/kube/harness.ts";
import { kubectl } from "#tests/kube/kubectl.ts";
import { chartDir, helm, parseObjects, render, root } from "./helm.ts";

const manifestsCrds = join(root, "manifests", "crds");
const chartCrds = join(chartDir, "crds");

describe("chart/crds and manifests/crds", () => {
  test("chart/crds holds the NodeInventory and NodeInventoryShard CRDs; manifests/crds links them, byte-identical", () => {
    expect(readdirSync(chartCrds).sort()).toEqual(["nodeinventories.sandbox.cocoonstack.io.yaml", "nodeinventoryshards.sandbox.cocoonstack.io.yaml"]);
    for (const f of readdirSync(chartCrds)) {
      const link = join(manifestsCrds, f);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      expect(resolve(manifestsCrds, readlinkSync(link))).toBe(join(chartCrds, f));
      expect(lstatSync(join(chartCrds, f)).isFile()).toBe(true); // helm reads it without a symlink warning
      expect(readFileSync(link)).toEqual(readFileSync(join(chartCrds, f)));
    }
  });

  test("helm --include-crds renders the manifests files' objects, and no upstream CRD (seed 003)", async () => {
    const crds = (await render()).filter((o) => o.kind === "CustomResourceDefinition");
    expect(crds).toEqual(
      ["nodeinventories.sandbox.cocoonstack.io.yaml", "nodeinventoryshards.sandbox.cocoonstack.io.yaml"].map((f) => parse(readFileSync(join(manifestsCrds, f), "utf8"))),
    );
    const r = await helm(["template", "r", chartDir]);
    expect(r.stderr).toBe(""); // no "found symbolic link" line: the chart holds real files
  });
});

describe("the packaged chart", () => {
  test("helm package carries the CRD file, and the package renders the same objects", async () => {
    const out = mkdtempSync(join(tmpdir(), "chart-package-"));
    try {
      const pkg = await helm(["package", chartDir, "--destination", out]);
      expect(pkg.code).toBe(0);
      const tgz = join(out, "sandbox-operator-0.1.0.tgz");
      expect(existsSync(tgz)).toBe(true);
      const listing = Bun.spawnSync(["tar", "-tvzf", tgz]).stdout.toString();
      const crdLine = listing.split("\n").find((l) => l.endsWith("sandbox-operator/crds/nodeinventories.sandbox.cocoonstack.io.yaml"));
      expect(crdLine).toBeDefined();
      expect(crdLine!.startsWith("-")).toBe(true); // a regular file in the archive, not a link
      const fromPackage = await helm(["template", "r", tgz, "--namespace", "sandbox-system", "--include-crds"]);
      expect(fromPackage.code).toBe(0);
      expect(parseObjects(fromPackage.stdout)).toEqual(await render());
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe("the CRDs on a real kube-apiserver", () => {
  let cluster: TestCluster;
  const applied: string[] = [];

  beforeAll(async () => {
    cluster = await startKubeApiserver();
    // The README's steps, with the real kubectl: the node install's RBAC and NodeInventory CRD (through the link),
    // then the agent-sandbox CRDs the chart's README applies before the chart.
    const kubeconfig = cluster.kubeconfig();
    const node = await kubectl(["apply", "-f", join(root, "manifests/rbac.yaml"), "-f", join(root, "manifests/crds/nodeinventories.sandbox.cocoonstack.io.yaml")], { kubeconfig });
    applied.push(node.stdout, node.stderr);
    const pools = await kubectl(
      ["apply", "-f", join(root, "manifests/crds/sandboxtemplates.extensions.agents.x-k8s.io.yaml"), "-f", join(root, "manifests/crds/sandboxwarmpools.extensions.agents.x-k8s.io.yaml")],
      { kubeconfig },
    );
    applied.push(pools.stdout, pools.stderr);
    await kubectl(["wait", "--for=condition=Established", "--timeout=60s", "crd/nodeinventories.sandbox.cocoonstack.io", "crd/sandboxtemplates.extensions.agents.x-k8s.io", "crd/sandboxwarmpools.extensions.agents.x-k8s.io"], { kubeconfig });
    await cluster.createNamespace("team");
  }, 120_000);

  test("kubectl applies the README's manifests, the linked CRD included", () => {
    const out = applied.join("\n");
    expect(out).toContain("customresourcedefinition.apiextensions.k8s.io/nodeinventories.sandbox.cocoonstack.io created");
    expect(out).toContain("customresourcedefinition.apiextensions.k8s.io/sandboxtemplates.extensions.agents.x-k8s.io created");
    expect(out).toContain("customresourcedefinition.apiextensions.k8s.io/sandboxwarmpools.extensions.agents.x-k8s.io created");
    expect(out).toContain("clusterrole.rbac.authorization.k8s.io/vk-sandbox-node created");
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  async function create(path: string, body: object): Promise<Response> {
    return cluster.adminFetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  }

  const pools = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/team/sandboxwarmpools";
  const templates = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/team/sandboxtemplates";

  test("a SandboxTemplate keeps the pod spec and the fields the driver does not type", async () => {
    const r = await create(templates, {
      apiVersion: "extensions.agents.x-k8s.io/v1beta1",
      kind: "SandboxTemplate",
      metadata: { name: "python" },
      spec: {
        podTemplate: {
          metadata: { annotations: { "sandbox.cocoonstack.io/net": "egress" } },
          spec: {
            containers: [{ name: "main", image: "python:3.12", resources: { limits: { cpu: "2", memory: "4Gi" } } }],
            runtimeClassName: "microvm",
          },
        },
        networkPolicy: { ingress: [] },
      },
    });
    expect(r.status).toBe(201);
    const got = (await r.json()) as {
      spec: {
        podTemplate: { spec: { containers: { resources?: unknown }[]; runtimeClassName?: string } };
        networkPolicy?: unknown;
      };
    };
    expect(got.spec.podTemplate.spec.containers[0]!.resources).toEqual({ limits: { cpu: "2", memory: "4Gi" } });
    expect(got.spec.podTemplate.spec.runtimeClassName).toBe("microvm");
    expect(got.spec.networkPolicy).toEqual({ ingress: [] });
  });

  test("a SandboxTemplate without containers is refused, naming the field", async () => {
    const r = await create(templates, {
      apiVersion: "extensions.agents.x-k8s.io/v1beta1",
      kind: "SandboxTemplate",
      metadata: { name: "empty" },
      spec: { podTemplate: { spec: {} } },
    });
    expect(r.status).toBe(422);
    expect(await r.text()).toContain("spec.podTemplate.spec.containers");
  });

  test("a SandboxWarmPool defaults replicas to 1, refuses a negative count, and scales through /scale", async () => {
    const pool = (name: string, spec: object) => ({
      apiVersion: "extensions.agents.x-k8s.io/v1beta1",
      kind: "SandboxWarmPool",
      metadata: { name },
      spec,
    });
    const created = await create(pools, pool("py", { sandboxTemplateRef: { name: "python" } }));
    expect(created.status).toBe(201);
    expect(((await created.json()) as { spec: { replicas: number } }).spec.replicas).toBe(1);

    const negative = await create(pools, pool("neg", { replicas: -1, sandboxTemplateRef: { name: "python" } }));
    expect(negative.status).toBe(422);
    expect(await negative.text()).toContain("spec.replicas");

    const noRef = await create(pools, pool("noref", { replicas: 1 }));
    expect(noRef.status).toBe(422);
    expect(await noRef.text()).toContain("spec.sandboxTemplateRef");

    // The driver's write-back: the status subresource only.
    const status = await cluster.adminFetch(`${pools}/py/status`, {
      method: "PATCH",
      headers: { "content-type": "application/merge-patch+json" },
      body: JSON.stringify({ status: { replicas: 3, readyReplicas: 3, selector: "agents.x-k8s.io/warm-pool=py" } }),
    });
    expect(status.status).toBe(200);

    const scale = await cluster.adminFetch(`${pools}/py/scale`);
    expect(scale.status).toBe(200);
    const s = (await scale.json()) as { spec: { replicas: number }; status: { replicas: number; selector: string } };
    expect(s.spec.replicas).toBe(1);
    expect(s.status).toEqual({ replicas: 3, selector: "agents.x-k8s.io/warm-pool=py" });
  });

  test("NodeInventory is cluster-scoped and keeps publishedAt", async () => {
    const r = await create("/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories", {
      apiVersion: "sandbox.cocoonstack.io/v1beta1",
      kind: "NodeInventory",
      metadata: { name: "node-a" },
      node: "node-a",
      address: "10.0.0.1:7777",
      publishedAt: "2026-01-01T00:00:00Z",
      pools: [{ template: "python:3.12", warm: 2, target: 2 }],
    });
    expect(r.status).toBe(201);
    expect(((await r.json()) as { publishedAt: string }).publishedAt).toBe("2026-01-01T00:00:00Z");
  });
});
