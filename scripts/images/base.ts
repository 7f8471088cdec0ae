// The images' base, assembled from Debian's packages because the registry bases cannot be pulled here: what
// distroless base-nocc-debian12 holds, per architecture. glibc and its loader (libc6), the CA bundle (ca-certificates,
// whose bundle file its maintainer script would make, so it is made here), tzdata, netbase (/etc/services,
// /etc/protocols), a passwd and group with root, nobody and nonroot (65532, the chart's runAsUser) and their homes,
// /tmp, nsswitch.conf and os-release. No shell, no package manager, no maintainer scripts run.
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { basename, join } from "node:path";
import type { Buildah } from "./buildah.ts";
import { type Arch, DEBIAN_SUITE, extractDeb, fetchDebs } from "./debian.ts";

export const BASE_PACKAGES = ["libc6", "ca-certificates", "tzdata", "netbase"];
export const NONROOT = 65532;

/** The base image's local name for an arch and the exact package files it holds (a security update is a new base). */
const baseImageName = (arch: Arch, debs: string[]) =>
  `localhost/sandbox-images-base:${DEBIAN_SUITE}-${arch}-${createHash("sha256").update(`${ASSEMBLY_VERSION}\n${debs.map((d) => basename(d)).join("\n")}`).digest("hex").slice(0, 12)}`;
/** Bump when assembleRootfs changes what it lays out, so a cached base is not reused. */
const ASSEMBLY_VERSION = 1;

const PASSWD = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:${NONROOT}:${NONROOT}:nonroot:/home/nonroot:/sbin/nologin
`;
const GROUP = `root:x:0:
nobody:x:65534:
nonroot:x:${NONROOT}:
`;
const NSSWITCH = `passwd: files
group: files
shadow: files
hosts: files dns
networks: files
protocols: files
services: files
ethers: files
rpc: files
`;

/** Lays the base's files out in `root` (a fresh directory) from `debs`. */
export async function assembleRootfs(root: string, debs: string[]): Promise<void> {
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  for (const deb of debs) await extractDeb(deb, root);
  // Documentation but the copyright files (kept, as distroless keeps them), manuals, lintian overrides.
  const doc = join(root, "usr/share/doc");
  if (existsSync(doc)) {
    for (const pkg of readdirSync(doc)) {
      for (const f of readdirSync(join(doc, pkg))) if (f !== "copyright") rmSync(join(doc, pkg, f), { recursive: true, force: true });
    }
  }
  for (const d of ["usr/share/man", "usr/share/lintian", "usr/share/info", "usr/sbin", "usr/bin", "sbin", "bin"]) {
    // libc6 ships a few helper programs (ldconfig, iconvconfig, getconf…); the image runs one binary, needs none.
    rmSync(join(root, d), { recursive: true, force: true });
  }
  // ca-certificates' postinst makes this bundle from the Mozilla set; the same concatenation, sorted by name.
  const mozilla = join(root, "usr/share/ca-certificates/mozilla");
  const certs = readdirSync(mozilla).filter((f) => f.endsWith(".crt")).sort();
  if (certs.length < 50) throw new Error(`ca-certificates holds only ${certs.length} certificates in ${mozilla}`);
  mkdirSync(join(root, "etc/ssl/certs"), { recursive: true });
  writeFileSync(join(root, "etc/ssl/certs/ca-certificates.crt"), certs.map((f) => readFileSync(join(mozilla, f), "utf8").trimEnd() + "\n").join(""));
  writeFileSync(join(root, "etc/passwd"), PASSWD);
  writeFileSync(join(root, "etc/group"), GROUP);
  writeFileSync(join(root, "etc/nsswitch.conf"), NSSWITCH);
  writeFileSync(
    join(root, "etc/os-release"),
    `PRETTY_NAME="sandbox control plane base (Debian GNU/Linux 12 packages)"\nNAME="Debian GNU/Linux"\nID=debian\nVERSION_ID="12"\nVERSION_CODENAME=${DEBIAN_SUITE}\n`,
  );
  // The zone the runtime falls back to without TZ.
  if (!existsSync(join(root, "usr/share/zoneinfo/UTC"))) throw new Error("tzdata left no usr/share/zoneinfo/UTC");
  for (const [d, mode, owner] of [["tmp", 0o1777, 0], ["root", 0o700, 0], ["home/nonroot", 0o700, NONROOT]] as const) {
    mkdirSync(join(root, d), { recursive: true });
    chmodSync(join(root, d), mode);
    chownSync(join(root, d), owner, owner);
  }
}

/**
 * The base image for `arch` in buildah's storage, built unless one of the same package files is there already;
 * returns its name and the unpacked root (for running the arch's binaries under emulation).
 */
export async function buildBase(buildah: Buildah, arch: Arch, workDir: string, log: (l: string) => void): Promise<{ name: string; rootfs: string }> {
  const debs = await fetchDebs({ arch, dir: join(workDir, `apt-${arch}`), packages: BASE_PACKAGES });
  const name = baseImageName(arch, debs);
  const rootfs = join(workDir, `rootfs-${arch}`);
  const cached = existsSync(join(rootfs, ".base-name")) && readFileSync(join(rootfs, ".base-name"), "utf8") === name;
  if (cached && (await buildah.run(["inspect", "--type", "image", name]).then(() => true, () => false))) {
    log(`base ${arch}: ${name} (cached)`);
    return { name, rootfs };
  }
  log(`base ${arch}: ${debs.map((d) => basename(d)).join(", ")}`);
  await assembleRootfs(rootfs, debs);
  await buildah.removeIfPresent("rmi", name);
  const ctr = await buildah.run(["from", "--arch", arch, "--os", "linux", "scratch"]);
  try {
    await buildah.run(["copy", ctr, rootfs, "/"]);
    // COPY makes everything root's; nonroot's home is its own (distroless's is too).
    const home = join(workDir, "empty-home");
    mkdirSync(home, { recursive: true });
    await buildah.run(["copy", "--chown", `${NONROOT}:${NONROOT}`, "--chmod", "0700", ctr, home, "/home/nonroot"]);
    await buildah.run(["config", "--arch", arch, "--os", "linux", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "--env", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", ctr]);
    await buildah.run(["commit", "--quiet", "--omit-history", "--timestamp", "0", ctr, name]);
  } finally {
    await buildah.run(["rm", ctr]).catch(() => undefined);
  }
  // Outside the image (written after the copy): marks which base this unpacked root is.
  writeFileSync(join(rootfs, ".base-name"), name);
  return { name, rootfs };
}
