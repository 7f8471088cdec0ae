// The Pod sandbox ("pause") image: registry images cannot be pulled here, so a tiny static C program written for
// these tests (it waits for signals and reaps children), compiled with the machine's gcc and packed with buildah as
// an OCI archive for containerd to import. Cached by the source's hash under $SANDBOX_CACHE.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Buildah } from "#scripts/images/buildah.ts";
import { cacheRoot } from "../peers.ts";
import { sh } from "./network.ts";

const SOURCE = `#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  signal(SIGINT, stop);
  signal(SIGTERM, stop);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
`;

export const PAUSE_IMAGE = "localhost/sbx-pause:1";

/** The pause image's OCI archive (built on first call). */
export async function pauseArchive(): Promise<string> {
  const key = createHash("sha256").update(SOURCE).digest("hex").slice(0, 12);
  const dir = join(cacheRoot(), `pause-${key}`);
  const archive = join(dir, "pause.oci.tar");
  if (existsSync(archive)) return archive;
  const work = `${dir}.tmp-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(join(work, "bin"), { recursive: true });
  writeFileSync(join(work, "pause.c"), SOURCE);
  await sh(["gcc", "-static", "-Os", "-s", "-o", join(work, "bin", "pause"), join(work, "pause.c")], "gcc -static pause.c");
  const buildah = new Buildah(join(cacheRoot(), "images", "storage"));
  const ctr = await buildah.run(["from", "scratch"]);
  try {
    await buildah.run(["copy", "--chmod", "0755", ctr, join(work, "bin", "pause"), "/pause"]);
    await buildah.run(["config", "--entrypoint", '["/pause"]', "--user", "65535:65535", ctr]);
    await buildah.run(["commit", "--quiet", "--omit-history", "--timestamp", "0", ctr, PAUSE_IMAGE]);
  } finally {
    await buildah.run(["rm", ctr]).catch(() => undefined);
  }
  await buildah.run(["push", "--quiet", PAUSE_IMAGE, `oci-archive:${join(work, "pause.oci.tar")}:${PAUSE_IMAGE}`]);
  rmSync(dir, { recursive: true, force: true });
  renameSync(work, dir);
  return archive;
}
