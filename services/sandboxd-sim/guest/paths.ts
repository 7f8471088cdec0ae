// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// A sandbox's file tree is one host directory (its root). envd paths are guest paths: "/" is the root, the home is
// /home/user, relative paths resolve against the home. A host path already inside the root (what `pwd` prints in a
// command, since commands run as plain host processes) is accepted as is. Nothing resolves outside the root:
// ".." cannot climb out. Symlinks inside the tree are resolved inside it, as the kernel would resolve them for a
// process chrooted there: an absolute target starts again at the sandbox's "/", ".." stops at it (issue 27: the
// files API runs as the host's root, so a link to /etc/shadow made by `user` read the host's file). What is left is
// a race: a component swapped for a link between this resolution and the open (a development substrate; README.md).
import { lstatSync, readlinkSync } from "node:fs";
import { isAbsolute, join, normalize, relative, resolve, sep } from "node:path";

/** Symbolic links followed in one path, as the kernel's MAXSYMLINKS. */
const MAX_LINKS = 40;

export const GUEST_HOME = "/home/user";

export class GuestPaths {
  // A namespaced sandbox rebases it onto /proc/<pid 1>/root once started (sandbox.ts).
  constructor(public root: string) {}

  /** Called before each resolution: throws when the root is no longer the sandbox's (a namespaced sandbox ended). */
  check: () => void = () => {};

  /** The host directory commands start in and HOME points at. */
  get home(): string {
    return join(this.root, GUEST_HOME);
  }

  /**
   * Guest (or in-root host) path -> host path inside the root, every symbolic link on the way resolved inside the
   * root; the last component's too unless `o.follow` is false (remove, rename and lstat act on a link itself).
   * Throws PathError when it would leave the root or loops through links.
   */
  toHost(path: string, base = GUEST_HOME, o: { follow?: boolean } = {}): string {
    this.check();
    const p = path.trim() === "" ? base : path;
    const direct = normalize(p);
    const inRoot = direct === this.root || direct.startsWith(this.root + sep);
    const guest = inRoot ? this.toGuest(direct) : isAbsolute(p) ? normalize(p) : normalize(join(isAbsolute(base) ? base : GUEST_HOME, p));
    // normalize("/..") is "/": a guest path can never name anything above "/" = the root.
    const host = resolve(this.root, "." + (guest.startsWith("/") ? guest : `/${guest}`));
    if (host !== this.root && !host.startsWith(this.root + sep)) throw new PathError(`path ${JSON.stringify(path)} leaves the sandbox`);
    return this.resolveLinks(path, relative(this.root, host), o.follow !== false);
  }

  /**
   * Set for a namespaced sandbox, whose /proc is a procfs of the host's kernel: the files API, which acts as the
   * simulator (the host's root, every capability), must not reach it (forFiles).
   */
  kernelProc = false;

  /**
   * toHost for the files API (stat, list, read, write, move, remove, watch). A namespaced sandbox's /proc is refused:
   * a command there runs as its user with a bounded capability set, but the files API would write its files with every
   * capability of the host's root (another process's autogroup nice or OOM exemption, /proc/mtrr), which envd, acting
   * as the request's user, never could.
   */
  forFiles(path: string, base = GUEST_HOME, o: { follow?: boolean } = {}): string {
    const host = this.toHost(path, base, o);
    if (this.kernelProc && relative(this.root, host).split(sep)[0] === "proc") {
      throw new PathError(`path ${JSON.stringify(path)} is in /proc, which is not reached by the files API (it would act there as the host's root, with every capability); read it with a command`);
    }
    return host;
  }

  /** `rel` (below the root, no "." or ".." left) with each link resolved inside the root. */
  private resolveLinks(path: string, rel: string, followLast: boolean): string {
    const todo = rel === "" ? [] : rel.split(sep);
    const done: string[] = [];
    let links = 0;
    while (todo.length) {
      const name = todo.shift()!;
      if (name === "" || name === ".") continue;
      if (name === "..") {
        done.pop(); // never above the root
        continue;
      }
      let target: string | undefined;
      if (todo.length > 0 || followLast) {
        try {
          const at = join(this.root, ...done, name);
          if (lstatSync(at).isSymbolicLink()) target = readlinkSync(at);
        } catch {
          // missing (a file about to be written) or unreadable: kept as named
        }
      }
      if (target === undefined) {
        done.push(name);
        continue;
      }
      if (++links > MAX_LINKS) throw new PathError(`path ${JSON.stringify(path)}: too many levels of symbolic links`);
      if (target.startsWith("/")) done.length = 0; // an absolute target starts at the sandbox's "/"
      todo.unshift(...target.split("/"));
    }
    return done.length ? join(this.root, ...done) : this.root;
  }

  /** Host path inside the root -> the guest path envd reports. */
  toGuest(host: string): string {
    const rel = relative(this.root, host);
    if (rel === "") return "/";
    if (rel.startsWith("..")) return host;
    return "/" + rel.split(sep).join("/");
  }
}

export class PathError extends Error {}
