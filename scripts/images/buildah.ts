// buildah (Debian's package) with the images' own storage: a private root under the cache and the vfs driver, so
// the build touches neither the host's container storage nor needs overlay support, and works as root without a
// daemon. Each call is one buildah command; a failure carries its arguments and last stderr lines.
import { join } from "node:path";

export class Buildah {
  constructor(readonly storage: string) {}

  private globals(): string[] {
    return ["--root", join(this.storage, "root"), "--runroot", join(this.storage, "run"), "--storage-driver", "vfs"];
  }

  async run(args: string[], opts: { cwd?: string } = {}): Promise<string> {
    const proc = Bun.spawn(["buildah", ...this.globals(), ...args], {
      cwd: opts.cwd,
      stdout: "pipe",
      stderr: "pipe",
      // No registry is consulted: every FROM is a local image or scratch.
      env: { ...process.env, BUILDAH_ISOLATION: "chroot", LC_ALL: "C" },
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`buildah ${args.join(" ")} exited ${code}: ${err.trim().split("\n").slice(-4).join(" | ")}`);
    return out.trim();
  }

  /** Removes an image or manifest list by name if present (a rebuild replaces it). */
  async removeIfPresent(kind: "rmi" | "manifest rm", name: string): Promise<void> {
    try {
      await this.run([...kind.split(" "), name]);
    } catch {
      // absent
    }
  }
}
