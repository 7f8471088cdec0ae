// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// A namespaced sandbox's writable layer, as host directories under the sandbox's directory D:
//   D/layer            the sandbox's "/": its own /tmp, /root, /home/user, /var, /run, /opt … (plain directories),
//                      mount points for the system directories, /proc and /dev, and the host's usrmerge symlinks
//   D/sys/<dir>/up     the upper layer of the overlay mounted on /<dir> for each host system directory (/usr,
//                      /etc, …): writes there (useradd editing /etc/passwd) copy up into it, the host's stays as is
//   D/sys/<dir>/work   overlayfs's work directory (never copied)
// The lower layers are the host's system directories one by one, never `/` as a whole: a lower of `/` would show
// the host's /tmp, /root and every other sandbox's layer (and the kernel refuses an upper inside its lower).
import { spawnSync } from "node:child_process";
import { chownSync, chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync, type Stats } from "node:fs";
import { dirname, join } from "node:path";

/** Host directories the sandbox sees (read-only below its own layer). */
const SYSTEM_DIRS = ["usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];
/** Directories every sandbox gets empty and private (mode), besides the system ones. */
const PRIVATE_DIRS: [string, number][] = [
  ["tmp", 0o1777], ["root", 0o700], ["home", 0o755], ["var", 0o755], ["var/tmp", 0o1777], ["run", 0o755],
  ["opt", 0o755], ["srv", 0o755], ["mnt", 0o755], ["media", 0o755], ["proc", 0o555], ["dev", 0o755], ["sys", 0o555],
];

export const SANDBOX_USER = { name: "user", uid: 1000, gid: 1000, home: "/home/user" } as const;

export interface SystemDir {
  name: string;
  /** A host symlink (usrmerge: /bin -> usr/bin) is copied as a symlink, not overlaid. */
  link?: string;
}

/** The host's system directories present on this machine (computed once). */
export const systemDirs: () => SystemDir[] = (() => {
  let dirs: SystemDir[] | undefined;
  return () =>
    (dirs ??= SYSTEM_DIRS.flatMap((name): SystemDir[] => {
      const p = `/${name}`;
      if (!existsSync(p)) return [];
      return lstatSync(p).isSymbolicLink() ? [{ name, link: readlinkSync(p) }] : [{ name }];
    }));
})();

/** The overlaid (real) system directories: what the namespace mounts. */
export const overlaidDirs = (): string[] => systemDirs().filter((d) => !d.link).map((d) => d.name);

/** A sandbox's own /etc/passwd, /etc/group, /etc/shadow and /etc/gshadow: the host's, minus uid 1000 and password hashes, plus `user`. */
function seedUsers(etcUpper: string): void {
  // A non-root (rootless) simulator cannot read the host's /etc/shadow: every account then gets a locked entry.
  const lines = (f: string) => {
    try {
      return readFileSync(f, "utf8").split("\n").filter((l) => l.trim() !== "");
    } catch {
      return [];
    }
  };
  const u = SANDBOX_USER;
  const clash = (l: string, idField: number) => {
    const f = l.split(":");
    return f[0] === u.name || f[idField] === String(u.uid);
  };
  const passwd = lines("/etc/passwd").filter((l) => !clash(l, 2));
  passwd.push(`${u.name}:x:${u.uid}:${u.gid}::${u.home}:/bin/bash`);
  const group = lines("/etc/group").filter((l) => !clash(l, 2));
  group.push(`${u.name}:x:${u.gid}:`);
  const names = new Set(passwd.map((l) => l.split(":")[0]));
  // No host password hash enters a sandbox; `user` has none either (root can `su user`).
  const hostShadow = lines("/etc/shadow").map((l) => l.split(":"));
  const shadowed = hostShadow.length ? hostShadow : [...names].map((n) => [n!, "*", "19700", "0", "99999", "7", "", "", ""]);
  const shadow = shadowed
    .filter((f) => names.has(f[0]!) && f[0] !== u.name)
    .map((f) => [f[0], "*", ...f.slice(2)].join(":"));
  shadow.push(`${u.name}:*:19700:0:99999:7:::`);
  writeFileSync(join(etcUpper, "passwd"), passwd.join("\n") + "\n", { mode: 0o644 });
  writeFileSync(join(etcUpper, "group"), group.join("\n") + "\n", { mode: 0o644 });
  writeFileSync(join(etcUpper, "shadow"), shadow.join("\n") + "\n", { mode: 0o640 });
  // gshadow from the sandbox's groups (no group passwords): the host's is root's alone, unreadable rootless.
  const gshadow = group.map((l) => l.split(":")).map((f) => `${f[0]}:!::${f[3] ?? ""}`);
  writeFileSync(join(etcUpper, "gshadow"), gshadow.join("\n") + "\n", { mode: 0o640 });
  // The subordinate id files useradd edits, as the sandbox's own (rootless, the host's root-owned ones cannot be copied up).
  for (const f of ["subuid", "subgid"]) if (existsSync(`/etc/${f}`)) writeFileSync(join(etcUpper, f), lines(`/etc/${f}`).map((l) => `${l}\n`).join(""), { mode: 0o644 });
  // The user tools' lock file and backups (`passwd-` …) as the sandbox's own: rootless, the host's are root's, which
  // root inside (the simulator's uid) can neither open nor copy up.
  writeFileSync(join(etcUpper, ".pwd.lock"), "", { mode: 0o600 });
  for (const f of ["passwd", "group", "shadow", "gshadow", "subuid", "subgid"]) {
    if (existsSync(join(etcUpper, f))) copyFileSync(join(etcUpper, f), join(etcUpper, `${f}-`));
  }
}

/** Create a fresh layer in `dir` (the sandbox's directory); rootless, every file stays the simulator's (root inside). */
export function prepareLayer(dir: string, o: { rootless?: boolean } = {}): void {
  const root = join(dir, "layer");
  mkdirSync(root, { recursive: true });
  for (const [p, mode] of PRIVATE_DIRS) {
    mkdirSync(join(root, p), { recursive: true });
    chmodSync(join(root, p), mode);
  }
  const home = join(root, SANDBOX_USER.home);
  mkdirSync(home, { recursive: true });
  if (!o.rootless) chownSync(home, SANDBOX_USER.uid, SANDBOX_USER.gid);
  for (const d of systemDirs()) {
    if (d.link) symlinkSync(d.link, join(root, d.name));
    else mkdirSync(join(dir, "sys", d.name, "up"), { recursive: true });
  }
  seedUsers(join(dir, "sys", "etc", "up"));
  if (!o.rootless) maskHostSecrets("/etc", join(dir, "sys", "etc", "up"));
  ensureWorkDirs(dir);
}

/** What sudo inside needs to read (root-only, not a secret): kept. */
const KEEP_ROOT_ONLY = new Set(["/etc/sudoers", "/etc/sudoers.d"]);

/**
 * Every host file under /etc that only its owner or group may read (keys in /etc/ssl/private, a k3s or kubeadm admin
 * kubeconfig, VPN and Wi-Fi secrets, /etc/security/opasswd) gets an empty file of the same owner and mode in the
 * sandbox's upper layer, which hides the host's. Rootful, root inside is uid 0 with CAP_DAC_OVERRIDE over the
 * overlay's lower layer, the host's /etc itself; the seeded account files (seedUsers) are the sandbox's already.
 * Read at each new layer (a directory walk of /etc, ~1-30 ms), so a file the host gained since is hidden too.
 */
function maskHostSecrets(hostDir: string, upperDir: string, hidden = false): void {
  let names: string[];
  try {
    names = readdirSync(hostDir);
  } catch {
    return;
  }
  for (const name of names) {
    const host = join(hostDir, name);
    if (KEEP_ROOT_ONLY.has(host)) continue;
    let st: Stats;
    try {
      st = lstatSync(host);
    } catch {
      continue; // gone meanwhile
    }
    const upper = join(upperDir, name);
    if (st.isDirectory()) {
      // A directory others may not enter hides every file in it.
      const closed = hidden || (st.mode & 0o001) === 0;
      maskHostSecrets(host, upper, closed);
      continue;
    }
    if (!st.isFile() || (!hidden && (st.mode & 0o004) !== 0) || existsSync(upper)) continue;
    mkdirLike(hostDir, upperDir);
    writeFileSync(upper, "", { mode: st.mode & 0o7777 });
    chownSync(upper, st.uid, st.gid);
    chmodSync(upper, st.mode & 0o7777);
  }
}

/** The upper directory for a host directory, with its owner and mode (an upper directory's are the merged one's). */
function mkdirLike(hostDir: string, upperDir: string): void {
  if (existsSync(upperDir)) return;
  mkdirLike(dirname(hostDir), dirname(upperDir));
  const st = lstatSync(hostDir);
  mkdirSync(upperDir);
  chownSync(upperDir, st.uid, st.gid);
  chmodSync(upperDir, st.mode & 0o7777);
}

/** The sandbox's /etc/hostname and an /etc/hosts naming it (the host's entries kept), for a new or copied layer. */
export function nameLayer(dir: string, hostname: string): void {
  const etc = join(dir, "sys", "etc", "up");
  mkdirSync(etc, { recursive: true });
  writeFileSync(join(etc, "hostname"), `${hostname}\n`);
  const hosts = (existsSync("/etc/hosts") ? readFileSync("/etc/hosts", "utf8") : "127.0.0.1\tlocalhost\n").trimEnd();
  writeFileSync(join(etc, "hosts"), `${hosts}\n127.0.1.1\t${hostname}\n`);
}

/** Mount points and overlay work directories (a copied layer has neither). */
export function ensureWorkDirs(dir: string): void {
  for (const name of overlaidDirs()) {
    mkdirSync(join(dir, "layer", name), { recursive: true });
    mkdirSync(join(dir, "sys", name, "up"), { recursive: true });
    mkdirSync(join(dir, "sys", name, "work"), { recursive: true });
  }
}

/**
 * Copy a layer (fork, checkpoint, promote): the sandbox's own tree and each system directory's upper layer, with
 * owners, modes, xattrs and whiteouts (`cp -a`, a reflink where the filesystem can). A live source is copied as it
 * stands; no memory comes along.
 */
export function copyLayer(from: string, to: string): void {
  mkdirSync(join(to, "sys"), { recursive: true });
  const cp = (src: string, dst: string) => {
    if (!existsSync(src)) return;
    const r = spawnSync("cp", ["--reflink=auto", "-a", src, dst], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`copying the sandbox layer ${src} -> ${dst} failed: ${r.stderr || r.error?.message}`);
  };
  cp(join(from, "layer"), join(to, "layer"));
  for (const name of overlaidDirs()) {
    mkdirSync(join(to, "sys", name), { recursive: true });
    cp(join(from, "sys", name, "up"), join(to, "sys", name, "up"));
  }
}

/**
 * Remove a sandbox's (or a probe's) directory. Rootless, overlayfs leaves its `work/work` directory mode 000 and the
 * simulator is no root to ignore that: on EACCES, give the owner back every permission in the tree and try again.
 */
export function removeTree(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EACCES") throw e;
    spawnSync("chmod", ["-R", "u+rwx", dir]);
    rmSync(dir, { recursive: true, force: true });
  }
}
