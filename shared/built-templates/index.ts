// Built templates and who may name them (docs/decisions.md "Built templates belong to their namespace"). The e2b
// surface promotes a build's result, its step cache entries and its named snapshots on the nodes as
// `e2b/<namespace>/<name>`; sandboxd itself knows no namespaces, so any caller holding a node's root token (vk-sandbox
// for a Pod, sandbox-apiserver for a Sandbox or a warm pool) would clone whatever such a name it is handed. This is
// the one check every path that takes a template from a Kubernetes object runs before it claims or pools one:
//   - an e2b key's namespace is the Kubernetes namespace of the same name (a claim belongs to both through its
//     claim_ref `<ns>/…`), so an object in namespace N may name `e2b/N/<name>`, a template N's keys built;
//   - never another namespace's `e2b/M/…`, never a step cache entry `e2b/N/_c-…` (internal to the builds: pruned
//     at any time, and not a template anyone named), never a malformed `e2b/` name;
//   - any other template (a pool image) is not this check's business.
// The e2b surface itself is stricter: no create names an `e2b/` template at all (it resolves bare names in the key's
// own namespace).

/** Built templates are promoted as `e2b/<namespace>/<name>`. */
export const BUILT_PREFIX = "e2b/";
/** Step cache entries are built templates named `_c-<key>` (a build name cannot start with `_`). */
export const CACHE_NAME_PREFIX = "_c-";

/** The namespace and name of a built template in its canonical form, or undefined when `template` is not one. */
export function builtTemplateParts(template: string): { namespace: string; name: string } | undefined {
  const m = /^e2b\/([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\/([A-Za-z0-9_][A-Za-z0-9._-]*)$/.exec(template);
  return m ? { namespace: m[1]!, name: m[3]! } : undefined;
}

/** Whether `template` falls under the built-template prefix (any case, any surrounding blanks: a node may not trim). */
export function looksBuilt(template: string): boolean {
  return template.trim().toLowerCase().startsWith(BUILT_PREFIX);
}

export type TemplateRefusal =
  /** Another namespace's built template: the caller may not read it (403). */
  | { kind: "other-namespace"; message: string; owner: string }
  /** A step cache entry or a malformed `e2b/` name: not a template (422). */
  | { kind: "invalid"; message: string };

const shown = (template: string) => JSON.stringify(template.length > 120 ? `${template.slice(0, 120)}…` : template);

/**
 * Why an object in Kubernetes namespace `namespace` may not claim or pool `template`; undefined when it may. The
 * messages name the template and both namespaces, and are meant for a Pod's status, a Status reply or an Event.
 */
export function builtTemplateRefusal(template: string, namespace: string): TemplateRefusal | undefined {
  if (!looksBuilt(template)) return undefined;
  const parts = builtTemplateParts(template);
  if (!parts) {
    return { kind: "invalid", message: `template ${shown(template)} is not a built template name: want e2b/<namespace>/<name>, as the e2b surface promotes them` };
  }
  if (parts.namespace !== namespace) {
    return {
      kind: "other-namespace",
      owner: parts.namespace,
      message: `template ${shown(template)} belongs to namespace "${parts.namespace}": a built template may be named only from its own namespace, not from "${namespace}"`,
    };
  }
  if (parts.name.startsWith(CACHE_NAME_PREFIX)) {
    return { kind: "invalid", message: `template ${shown(template)} is a build step cache entry, not a template: name the built template instead` };
  }
  return undefined;
}
