// services/sandbox-apiserver/sandboxes — the folder's front door: what other folders may import from it.
// object.ts first: create.ts and mutations.ts import ../api, whose modules read GROUP/VERSION at load time through
// this file, so the constants must be initialised before that cycle is entered (a test loads every index alone).
export { ANN_NET, API_VERSION, GROUP, KIND, LIST_KIND, RESOURCE, type Sandbox, VERSION } from "./object.ts";
export { type CreateDeps, createSandbox } from "./create.ts";
export { type Verb, deleteSandbox, runVerb, setOperatingMode } from "./mutations.ts";
export { type SubresourceReview, kubeSubresourceReview } from "./operating-mode.ts";
export { type Caller, POD_PERMISSION, type PodAction, PodGuard, type PodGuardBackend, kubePodGuardBackend } from "./pod-guard.ts";
export { NodeClients, mapBounded } from "./nodes.ts";
export { type PodTemplateLike, PoolKeyError, poolKeyOf } from "./pool-key.ts";
export { NODE_FANOUT, type Resolved, SandboxReader } from "./store.ts";
export { type ChangeBatch, type SandboxChange, SandboxChanges, keyOf } from "./changes.ts";
