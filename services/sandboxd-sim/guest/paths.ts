// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// A sandbox's file tree is one host directory (its root). envd paths are guest paths: "/" is the root, the home is
// /home/user, relative paths resolve against the home. A host path already inside the root (what `pwd` prints in a
// command, since commands run as plain host processes) is accepted as is. Nothing resolves outside the root:
// ".." cannot climb out. Symlinks made by commands inside the tree are followed like any host path: this is a
// process sandbox, not isolation (README.md).
import { isAbsolute, join, normalize, relative, resolve, sep } from "node:path";

export const GUEST_HOME = "/home/user";

export class GuestPaths {
  // A namespaced sandbox rebases it onto /proc/<pid 1>/root once started (sandbox.ts).
  constructor(public root: string) {}

  /** The host directory commands start in and HOME points at. */
  get home(): string {
    return join(this.root, GUEST_HOME);
  }

  /** Guest (or in-root host) path -> host path inside the root. Throws PathError when it would leave the root. */
  toHost(path: string, base = GUEST_HOME): string {
    const p = path.trim() === "" ? base : path;
    const direct = normalize(p);
    if (direct === this.root || direct.startsWith(this.root + sep)) return direct;
    const guest = isAbsolute(p) ? normalize(p) : normalize(join(isAbsolute(base) ? base : GUEST_HOME, p));
    // normalize("/..") is "/": a guest path can never name anything above "/" = the root.
    const host = resolve(this.root, "." + (guest.startsWith("/") ? guest : `/${guest}`));
    if (host !== this.root && !host.startsWith(this.root + sep)) throw new PathError(`path ${JSON.stringify(path)} leaves the sandbox`);
    return host;
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
