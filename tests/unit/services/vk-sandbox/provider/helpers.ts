// Test doubles for the provider: waitable counters and sandboxd doubles (sandboxd-doubles.ts), an owner reader
// backed by a map, pod builders and a harness. Tests wait on conditions (counters, promises, loop ticks),
// never on wall time.
import { afterEach } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import type { V1Pod } from "@kubernetes/client-node";
import { ClaimsFile, ClaimsStore } from "#services/vk-sandbox/claims/index.ts";
import type { ClaimsFs } from "#services/vk-sandbox/claims/file.ts";
import { createSandboxProvider } from "#services/vk-sandbox/provider/sandbox-provider.ts";
import type { OwnerLookup, OwnerObject, OwnerReader, OwnerTarget } from "#services/vk-sandbox/provider/types.ts";
import { FakeClock } from "#shared/clock/index.ts";
import { closeSandboxds, Counter, makeSandboxd, type SandboxdDouble } from "./sandboxd-doubles.ts";

/**
 * The simulator's fake clock: time moves only by advance(), due timers fire in order inside it. The provider
 * and the simulated node share one, so a lease that passes for one passes for the other.
 */
export { FakeClock };
export * from "./sandboxd-doubles.ts";

/**
 * Owners by namespace and name, as the apiserver holds them; each entry is what a GET answers. A read answers
 * only the object of the namespace it asks (a same-named owner elsewhere is another object), and unknown objects
 * answer a 404 naming the object. The namespace defaults to "default", where pod() puts Pods.
 */
export class FakeOwners {
  readonly objects = new Map<string, OwnerLookup>();
  readonly reads = new Counter();
  readonly targets: OwnerTarget[] = [];
  /** The namespace of each read, in order (parallel to `targets`). */
  readonly namespaces: string[] = [];
  alive(name: string, uid: string, extra: Partial<OwnerObject> = {}, ns = "default"): void {
    this.objects.set(`${ns}/${name}`, { outcome: "found", object: { metadata: { uid }, ...extra } });
  }
  set(name: string, lookup: OwnerLookup, ns = "default"): void {
    this.objects.set(`${ns}/${name}`, lookup);
  }
  gone(name: string, ns = "default"): void {
    this.objects.delete(`${ns}/${name}`);
  }
  readonly reader: OwnerReader = async (ref, namespace) => {
    this.reads.inc();
    this.targets.push(ref);
    this.namespaces.push(namespace);
    return this.objects.get(`${namespace}/${ref.name}`) ?? { outcome: "not-found", detailsName: ref.name };
  };
}

export interface PodOpts {
  ns?: string;
  name?: string;
  uid?: string;
  annotations?: Record<string, string>;
  owner?: { name: string; uid: string; kind?: string; apiVersion?: string } | null;
  containers?: Array<{ name: string; image: string }>;
}

/** A Pod as the pod controller hands it over; by default owned by a Sandbox named after the Pod. */
export function pod(o: PodOpts = {}): V1Pod {
  const name = o.name ?? "sb1";
  const owner =
    o.owner === null
      ? undefined
      : { apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", name, uid: `owner-${name}`, ...(o.owner ?? {}) };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      namespace: o.ns ?? "default",
      name,
      uid: o.uid ?? `uid-${name}`,
      annotations: { "sandbox.cocoonstack.io/template": "python", ...o.annotations },
      ...(owner ? { ownerReferences: [{ ...owner, controller: true, blockOwnerDeletion: true }] } : {}),
    },
    spec: { nodeName: "vk-sandboxd", containers: o.containers ?? [{ name: "main", image: "python:3.12" }] },
    status: { phase: "Pending" },
  };
}

/** The metadata a claim for `pod({ name })` carries on the harness node (vk-sandboxd), spelled out literally. */
export function claimMetadataOf(name: string, o: { uid?: string; authority?: string } = {}): Record<string, string> {
  return {
    "vk-sandbox.node": NODE_NAME,
    "vk-sandbox.pod-uid": o.uid ?? `uid-${name}`,
    "vk-sandbox.authority": o.authority ?? `owner-${name}`,
  };
}

export function bare(o: PodOpts = {}): V1Pod {
  return pod({ ...o, owner: null });
}

export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "vk-claims-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The per-test scratch space every provider test file sets up: registers an afterEach that stops the sandboxd
 * doubles the test started and removes every directory handed out. Call once at the top of a test file; the
 * returned function makes a fresh temporary directory.
 */
export function scratchDirs(): () => string {
  let cleanups: Array<() => void> = [];
  afterEach(async () => {
    await closeSandboxds();
    for (const c of cleanups) c();
    cleanups = [];
  });
  return () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    return t.dir;
  };
}

/** The claims table as written to `path`, parsed. */
export const readTable = (path: string) => JSON.parse(readFileSync(path, "utf8"));

/** A pino logger whose records land in `lines` (parsed). */
export function captureLog() {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: "debug" }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { log, lines };
}

/** The node name every harness provider runs as. */
export const NODE_NAME = "vk-sandboxd";

export interface HarnessOpts {
  path: string;
  clock?: FakeClock;
  sandboxd?: SandboxdDouble;
  owners?: FakeOwners | null;
  start?: boolean;
  /** The file-system calls behind the claims file (a test injects a failing disk); default node:fs. */
  fs?: ClaimsFs;
}

/** A provider over a real file, a stub sandboxd and fake owners; pushes are collected. */
export async function harness(o: HarnessOpts) {
  const clock = o.clock ?? new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
  const sandboxd = o.sandboxd ?? (await makeSandboxd(clock));
  const owners = o.owners === null ? undefined : (o.owners ?? new FakeOwners());
  const { log, lines } = captureLog();
  const store = new ClaimsStore(new ClaimsFile({ path: o.path, ...(o.fs ? { fs: o.fs } : {}) }));
  const handle = createSandboxProvider({
    nodeName: NODE_NAME,
    claimer: sandboxd,
    releaser: sandboxd,
    lister: sandboxd,
    reader: sandboxd,
    ownerReader: owners?.reader,
    store,
    log,
    clock,
  });
  const pushes: V1Pod[] = [];
  const pushCount = new Counter();
  handle.provider.notifyPods((p) => {
    pushes.push(p);
    pushCount.inc();
  });
  await handle.ready;
  return { ...handle, p: handle.provider, impl: handle.impl, clock, sandboxd, owners, store, lines, pushes, pushCount };
}

export type Harness = Awaited<ReturnType<typeof harness>>;
