// Debian packages of a given architecture, fetched with a private apt configuration (its own sources, lists and
// cache under the images' cache dir), so neither the host's dpkg architectures nor its package lists change, and an
// amd64 host fetches arm64 packages the same way as its own. The archive's signatures are checked with the host's
// debian-archive-keyring.
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export type Arch = "amd64" | "arm64";

/** The release the base is assembled from: distroless base-nocc-debian12's. */
export const DEBIAN_SUITE = "bookworm";
export const DEBIAN_MIRROR = process.env.SANDBOX_DEBIAN_MIRROR || "http://deb.debian.org";
const KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg";

export interface DebianFetch {
  arch: Arch;
  /** Where this arch's private apt state and the downloaded .debs live. */
  dir: string;
  packages: string[];
}

async function apt(dir: string, arch: Arch, args: string[], cwd: string): Promise<string> {
  const opts = [
    `Dir::State=${join(dir, "state")}`,
    `Dir::State::status=${join(dir, "status")}`,
    `Dir::Cache=${join(dir, "cache")}`,
    `Dir::Etc::SourceList=${join(dir, "sources.list")}`,
    "Dir::Etc::SourceParts=/dev/null",
    `APT::Architecture=${arch}`,
    `APT::Architectures::=${arch}`,
    // The download lands in our own directory; apt's _apt sandbox user could not write there.
    "APT::Sandbox::User=root",
    "Debug::NoLocking=1",
  ].flatMap((o) => ["-o", o]);
  const proc = Bun.spawn(["apt-get", "-q", ...opts, ...args], { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, LC_ALL: "C" } });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`apt-get ${args.join(" ")} (${arch}) exited ${code}: ${err.trim().split("\n").slice(-3).join(" | ")}`);
  return out;
}

/**
 * Downloads `packages` for `arch` (the newest in the suite and its security and updates pockets) and returns the
 * .deb paths. Lists are refreshed once per call, so a rebuild picks up security updates.
 */
export async function fetchDebs({ arch, dir, packages }: DebianFetch): Promise<string[]> {
  if (!existsSync(KEYRING)) throw new Error(`${KEYRING} is missing: install Debian's debian-archive-keyring`);
  for (const d of ["state/lists/partial", "cache/archives/partial", "debs"]) mkdirSync(join(dir, d), { recursive: true });
  if (!existsSync(join(dir, "status"))) writeFileSync(join(dir, "status"), "");
  const src = (path: string, suite: string) => `deb [arch=${arch} signed-by=${KEYRING}] ${DEBIAN_MIRROR}/${path} ${suite} main\n`;
  writeFileSync(
    join(dir, "sources.list"),
    src("debian", DEBIAN_SUITE) + src("debian", `${DEBIAN_SUITE}-updates`) + src("debian-security", `${DEBIAN_SUITE}-security`),
  );
  await apt(dir, arch, ["update"], dir);
  const debs = join(dir, "debs");
  for (const f of readdirSync(debs)) if (f.endsWith(".deb")) Bun.spawnSync(["rm", "-f", join(debs, f)]);
  await apt(dir, arch, ["download", ...packages], debs);
  const got = readdirSync(debs).filter((f) => f.endsWith(".deb"));
  for (const p of packages) {
    if (!got.some((f) => f.startsWith(`${p}_`))) throw new Error(`apt-get download left no ${p}_*.deb for ${arch} in ${debs}`);
  }
  return got.sort().map((f) => join(debs, f));
}

/** Unpacks a .deb's data into `root` (no maintainer scripts run: the base assembles what they would make). */
export async function extractDeb(deb: string, root: string): Promise<void> {
  const proc = Bun.spawn(["dpkg-deb", "-x", deb, root], { stdout: "ignore", stderr: "pipe" });
  const err = await new Response(proc.stderr).text();
  if ((await proc.exited) !== 0) throw new Error(`dpkg-deb -x ${deb}: ${err.trim()}`);
}
