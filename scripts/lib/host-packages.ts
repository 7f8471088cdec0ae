// Debian packages the project's scripts and test peers need on the host (buildah, qemu-user-static, containerd, …),
// installed with apt-get when missing. Needs root; a machine without apt-get or root gets an error naming the
// packages to install. A failed install runs `apt-get update` once and tries again (a fresh machine may have no
// package lists).
import { existsSync } from "node:fs";

/** Installs whichever of `packages` has a missing `probe` command. `probe` is a command on PATH or an absolute path. */
export async function ensureHostPackages(needs: Array<{ pkg: string; probe: string }>, log: (line: string) => void): Promise<void> {
  const missing = needs.filter((n) => (n.probe.startsWith("/") ? !existsSync(n.probe) : Bun.which(n.probe) === null)).map((n) => n.pkg);
  if (missing.length === 0) return;
  const names = [...new Set(missing)];
  if (Bun.which("apt-get") === null) throw new Error(`missing Debian packages ${names.join(", ")} and there is no apt-get to install them`);
  if (process.getuid?.() !== 0) throw new Error(`missing Debian packages ${names.join(", ")}: install them (apt-get install ${names.join(" ")}) or run as root`);
  log(`installing Debian packages ${names.join(" ")} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const install = () => Bun.spawn(["apt-get", "install", "-y", "--no-install-recommends", ...names], { env, stdout: "ignore", stderr: "pipe" });
  let proc = install();
  let err = await new Response(proc.stderr).text();
  if ((await proc.exited) !== 0) {
    log("apt-get install failed; running apt-get update once and trying again");
    await Bun.spawn(["apt-get", "update"], { env, stdout: "ignore", stderr: "inherit" }).exited;
    proc = install();
    err = await new Response(proc.stderr).text();
    const code = await proc.exited;
    if (code !== 0) throw new Error(`apt-get install ${names.join(" ")} exited ${code}: ${err.trim().split("\n").at(-1)}`);
  }
}

/** The Debian packages the tests' container tooling needs: the image builds and the single-node cluster. */
export const TEST_HOST_PACKAGES = [
  { pkg: "buildah", probe: "buildah" },
  { pkg: "qemu-user-static", probe: "qemu-aarch64-static" },
  { pkg: "containerd", probe: "containerd" },
  { pkg: "runc", probe: "runc" },
  { pkg: "containernetworking-plugins", probe: "/usr/lib/cni/bridge" },
  { pkg: "iptables", probe: "iptables" },
  { pkg: "conntrack", probe: "conntrack" },
  { pkg: "debian-archive-keyring", probe: "/usr/share/keyrings/debian-archive-keyring.gpg" },
];

if (import.meta.main) {
  // `bun run scripts/lib/host-packages.ts ensure` (scripts/bootstrap.sh, as root): install what the tests need.
  if (process.argv[2] !== "ensure") {
    console.error("usage: bun run scripts/lib/host-packages.ts ensure");
    process.exit(2);
  }
  await ensureHostPackages(TEST_HOST_PACKAGES, (l) => console.error(`bootstrap: ${l}`));
}
