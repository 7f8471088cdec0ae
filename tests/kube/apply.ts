// `apply` for the test cluster: server-side apply (force, one field manager) of every object in a YAML stream or
// array, so applying twice replaces what the harness set before. Namespaces and CRDs go first and CRDs are waited
// on until Established and served by discovery, so a single call may carry a CRD and objects of its kind.
import { parseAllDocuments } from "yaml";

export type AdminFetch = (path: string, init?: RequestInit) => Promise<Response>;

interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [k: string]: unknown;
}

interface ResourceInfo {
  name: string;
  namespaced: boolean;
}

const FIELD_MANAGER = "kube-test-harness";
const DISCOVERY_WAIT_MS = 15_000;

export function parseObjects(input: string | object[]): KubeObject[] {
  const raw = typeof input === "string"
    ? parseAllDocuments(input).map((d) => {
        if (d.errors.length) throw new Error(`apply: YAML: ${d.errors[0]!.message}`);
        return d.toJS() as unknown;
      })
    : input;
  const out: KubeObject[] = [];
  for (const o of raw) {
    if (o == null) continue; // empty document between two "---"
    const obj = o as KubeObject & { items?: unknown[] };
    if (obj.kind === "List" || (obj.kind?.endsWith("List") && Array.isArray(obj.items))) {
      out.push(...parseObjects((obj.items ?? []) as object[]));
      continue;
    }
    if (!obj.apiVersion || !obj.kind || !obj.metadata?.name) {
      throw new Error(`apply: object lacks apiVersion, kind or metadata.name: ${JSON.stringify(o).slice(0, 200)}`);
    }
    out.push(obj);
  }
  return out;
}

export class Applier {
  private readonly discovery = new Map<string, Map<string, ResourceInfo>>();

  constructor(
    private readonly fetchAdmin: AdminFetch,
    /** Called after a Namespace is applied: there is no controller-manager to create its default ServiceAccount. */
    private readonly onNamespace: (name: string) => Promise<void>,
  ) {}

  async apply(input: string | object[]): Promise<void> {
    const objects = parseObjects(input);
    const first = objects.filter((o) => o.kind === "Namespace" || isCRD(o));
    const rest = objects.filter((o) => !first.includes(o));
    for (const o of first) await this.applyOne(o);
    for (const o of first) {
      if (o.kind === "Namespace") await this.onNamespace(o.metadata.name);
      if (isCRD(o)) await this.waitEstablished(o);
    }
    for (const o of rest) await this.applyOne(o);
  }

  private async applyOne(o: KubeObject): Promise<void> {
    const res = await this.resourceFor(o.apiVersion, o.kind);
    const ns = res.namespaced ? (o.metadata.namespace ?? "default") : undefined;
    const body = { ...o, metadata: { ...o.metadata, ...(ns ? { namespace: ns } : {}) } };
    const path = `${groupVersionPath(o.apiVersion)}${ns ? `/namespaces/${ns}` : ""}/${res.name}/${o.metadata.name}`;
    const r = await this.fetchAdmin(`${path}?fieldManager=${FIELD_MANAGER}&force=true`, {
      method: "PATCH",
      headers: { "content-type": "application/apply-patch+yaml" },
      body: JSON.stringify(body), // JSON is YAML
    });
    if (!r.ok) throw new Error(`apply ${o.kind} ${ns ? `${ns}/` : ""}${o.metadata.name}: ${r.status} ${await r.text()}`);
  }

  private async waitEstablished(crd: KubeObject): Promise<void> {
    const name = crd.metadata.name;
    const deadline = Date.now() + DISCOVERY_WAIT_MS;
    for (;;) {
      const r = await this.fetchAdmin(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
      const body = (await r.json()) as {
        spec?: { group: string; versions: { name: string; served: boolean }[]; names: { kind: string } };
        status?: { conditions?: { type: string; status: string }[] };
      };
      const established = body.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
      if (established && body.spec) {
        // Established does not mean discovery serves it yet; wait for every served version to be listed.
        const versions = body.spec.versions.filter((v) => v.served);
        let served = true;
        for (const v of versions) {
          const gv = `${body.spec.group}/${v.name}`;
          this.discovery.delete(gv);
          const kinds = await this.discover(gv);
          if (!kinds?.has(body.spec.names.kind)) served = false;
        }
        if (served) return;
      }
      if (Date.now() > deadline) throw new Error(`apply: CRD ${name} not Established and served within ${DISCOVERY_WAIT_MS}ms`);
      await Bun.sleep(50);
    }
  }

  private async resourceFor(apiVersion: string, kind: string): Promise<ResourceInfo> {
    const deadline = Date.now() + DISCOVERY_WAIT_MS;
    for (;;) {
      const found = (await this.discover(apiVersion))?.get(kind);
      if (found) return found;
      // A kind we have not seen may belong to a CRD applied moments ago by someone else: refresh and retry.
      this.discovery.delete(apiVersion);
      if (Date.now() > deadline) throw new Error(`apply: the server does not serve kind ${kind} in ${apiVersion}`);
      await Bun.sleep(100);
    }
  }

  private async discover(apiVersion: string): Promise<Map<string, ResourceInfo> | undefined> {
    const cached = this.discovery.get(apiVersion);
    if (cached) return cached;
    const r = await this.fetchAdmin(groupVersionPath(apiVersion));
    if (r.status === 404) {
      await r.body?.cancel();
      return undefined;
    }
    if (!r.ok) throw new Error(`apply: discovery ${apiVersion}: ${r.status} ${await r.text()}`);
    const list = (await r.json()) as { resources: { name: string; kind: string; namespaced: boolean }[] };
    const kinds = new Map<string, ResourceInfo>();
    for (const res of list.resources) {
      if (res.name.includes("/")) continue; // subresources such as pods/status share the kind
      kinds.set(res.kind, { name: res.name, namespaced: res.namespaced });
    }
    this.discovery.set(apiVersion, kinds);
    return kinds;
  }
}

function isCRD(o: KubeObject): boolean {
  return o.kind === "CustomResourceDefinition" && o.apiVersion.startsWith("apiextensions.k8s.io/");
}

function groupVersionPath(apiVersion: string): string {
  return apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
}
