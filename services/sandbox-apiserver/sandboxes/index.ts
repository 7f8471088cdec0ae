// services/sandbox-apiserver/sandboxes — the folder's front door: what other folders may import from it.
export { type CreateDeps, createSandbox } from "./create.ts";
export { type Verb, deleteSandbox, runVerb } from "./mutations.ts";
export { NodeClients, mapBounded } from "./nodes.ts";
export { ANN_NET, API_VERSION, GROUP, KIND, LIST_KIND, RESOURCE, type Sandbox, VERSION } from "./object.ts";
export { type PodTemplateLike, PoolKeyError, poolKeyOf } from "./pool-key.ts";
export { NODE_FANOUT, type Resolved, SandboxReader } from "./store.ts";
