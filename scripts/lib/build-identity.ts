// The build identity both the binaries (scripts/build.ts) and the images (scripts/images/) are stamped with: the
// git revision of the tree, `-dirty` when it has uncommitted changes, or BUILD_REVISION for builds outside a checkout.

function git(root: string, args: string[]): string | undefined {
  const proc = Bun.spawnSync(["git", ...args], { cwd: root, stdout: "pipe", stderr: "ignore" });
  return proc.exitCode === 0 ? proc.stdout.toString().trim() : undefined;
}

export function revision(root: string): string {
  if (process.env.BUILD_REVISION) return process.env.BUILD_REVISION;
  const rev = git(root, ["rev-parse", "--short=12", "HEAD"]);
  if (!rev) return "unknown";
  // A build from a tree with uncommitted changes is not that commit; say so.
  return git(root, ["status", "--porcelain", "--untracked-files=no"]) ? `${rev}-dirty` : rev;
}
