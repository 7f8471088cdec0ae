// The control plane's images as the release builds them (`bash scripts/images.sh`, both architectures), built once
// per test process into tests/.out/images and shared by every file that needs them (the image checks, the
// single-node cluster). What the build printed is kept for the failure message.
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ImageReport } from "#scripts/images/oci.ts";
import { run } from "./run.ts";

const root = join(import.meta.dir, "..", "..");
export const IMAGE_NAMES = ["sandbox-apiserver", "sandbox-envd-proxy", "sandbox-e2b"] as const;
export type ImageName = (typeof IMAGE_NAMES)[number];

export interface BuiltImages {
  dir: string;
  tag: string;
  revision: string;
  version: string;
  archive(name: ImageName): string;
  reports: ImageReport[];
  log: string;
  seconds: number;
}

let building: Promise<BuiltImages> | undefined;

/**
 * The images of the working tree, built on first call. SANDBOX_TEST_IMAGES_DIR names a directory scripts/images.sh
 * already wrote (its images.json gives the tag): for iterating on the cluster tests without rebuilding; the image
 * tests then check what that directory holds.
 */
export function builtImages(): Promise<BuiltImages> {
  const reuse = process.env.SANDBOX_TEST_IMAGES_DIR;
  building ??= reuse ? Promise.resolve(load(reuse, "", 0)) : build();
  return building;
}

function load(dir: string, log: string, seconds: number): BuiltImages {
  const summary = JSON.parse(readFileSync(join(dir, "images.json"), "utf8")) as { version: string; revision: string; images: ImageReport[] };
  return {
    dir,
    tag: summary.images[0]?.tag ?? summary.version,
    revision: summary.revision,
    version: summary.version,
    archive: (name) => join(dir, `${name}.oci.tar`),
    reports: summary.images,
    log,
    seconds,
  };
}

async function build(): Promise<BuiltImages> {
  const dir = join(root, "tests", ".out", "images");
  mkdirSync(dir, { recursive: true });
  const tag = "0.0.0-test";
  const started = performance.now();
  // The bootstrap already ran (scripts/test.sh): skip its installs, keep its PATH.
  const r = await run(["bash", join(root, "scripts", "images.sh"), "--tag", tag, "--out", dir], {
    cwd: root,
    env: { ...process.env, SANDBOX_SKIP_JS_INSTALL: "1", SKIP_TEST_PEERS: "1" },
  });
  const log = `${r.stdout}${r.stderr}`;
  if (r.code !== 0) throw new Error(`bash scripts/images.sh exited ${r.code}:\n${log.split("\n").slice(-30).join("\n")}`);
  return load(dir, log, (performance.now() - started) / 1000);
}
