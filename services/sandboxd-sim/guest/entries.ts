// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// envd's EntryInfo for a host path: name, type, guest path, size, permission bits, Go-style permission string
// ("drwxr-xr-x"), owner and group names, modification time and a symlink's target.
import { lstatSync, readlinkSync, statSync, type Stats } from "node:fs";
import { basename } from "node:path";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { FileType, type EntryInfoSchema } from "./gen/filesystem/filesystem_pb.ts";
import type { GuestPaths } from "./paths.ts";
import { readSmallFile } from "./small-file.ts";
import type { FileMetadata } from "./metadata.ts";

export type EntryInit = MessageInitShape<typeof EntryInfoSchema>;

/** uid or gid -> name from an /etc/passwd-shaped file (name:x:id:…); empty when unreadable. */
function namesFrom(file: string): Map<number, string> {
  const out = new Map<number, string>();
  try {
    for (const line of readSmallFile(file).split("\n")) {
      const [name, , id] = line.split(":");
      if (name && id && /^\d+$/.test(id) && !out.has(Number(id))) out.set(Number(id), name);
    }
  } catch {
    // no such file, or not a regular file (a FIFO, a device): ids show as numbers
  }
  return out;
}

// A namespaced sandbox names owners from its own /etc (a user `useradd` made counts); a process sandbox, whose
// "/" has no /etc, from the host's. Re-read when the file changes. (os.userInfo() under Bun answers "unknown".)
const nameCache = new Map<string, { mtimeMs: number; names: Map<number, string> }>();
function namesOf(paths: GuestPaths, file: "passwd" | "group"): Map<number, string> {
  // Resolved inside the sandbox: its /etc/passwd may be a link, and this runs as the host's root (paths.ts).
  let path: string;
  try {
    path = paths.toHost(`/etc/${file}`, "/");
  } catch {
    // A link loop, or a sandbox that ended: no names (owners by number). Never the root's path opened as is: the
    // kernel would follow its links from the host's "/", or a host process that got PID 1's number.
    return new Map();
  }
  let st = statOrUndefined(path);
  if (!st) {
    path = `/etc/${file}`;
    st = statOrUndefined(path);
  }
  const hit = nameCache.get(path);
  if (hit && st && hit.mtimeMs === st.mtimeMs) return hit.names;
  const names = namesFrom(path);
  if (st) nameCache.set(path, { mtimeMs: st.mtimeMs, names });
  return names;
}
function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

export function fileTypeOf(st: Stats): FileType {
  if (st.isSymbolicLink()) return FileType.SYMLINK;
  if (st.isDirectory()) return FileType.DIRECTORY;
  if (st.isFile()) return FileType.FILE;
  return FileType.UNSPECIFIED;
}

/** Go's os.FileMode.String() for the common kinds. */
export function permissionString(st: Stats): string {
  const kind = st.isDirectory() ? "d" : st.isSymbolicLink() ? "L" : "-";
  const bits = "rwxrwxrwx";
  let out = kind;
  for (let i = 0; i < 9; i++) out += st.mode & (1 << (8 - i)) ? bits[i] : "-";
  return out;
}

/** The sandbox's user and group names by id (read once per listing, not once per entry). */
export interface OwnerNames {
  users: Map<number, string>;
  groups: Map<number, string>;
}
export function ownerNames(paths: GuestPaths): OwnerNames {
  return { users: namesOf(paths, "passwd"), groups: namesOf(paths, "group") };
}

/** lstat-based entry for a host path inside the sandbox (throws the fs error, e.g. ENOENT), with its metadata. */
export function entryOf(paths: GuestPaths, hostPath: string, metadata?: FileMetadata, names: OwnerNames = ownerNames(paths)): EntryInit {
  const st = lstatSync(hostPath);
  const guestPath = paths.toGuest(hostPath);
  const e: EntryInit = {
    name: basename(hostPath),
    type: fileTypeOf(st),
    path: guestPath,
    metadata: metadata?.get(guestPath) ?? {},
    size: BigInt(st.size),
    mode: st.mode & 0o7777,
    permissions: permissionString(st),
    owner: names.users.get(st.uid) ?? String(st.uid),
    group: names.groups.get(st.gid) ?? String(st.gid),
    modifiedTime: timestampFromMs(Math.floor(st.mtimeMs)),
  };
  if (st.isSymbolicLink()) {
    try {
      e.symlinkTarget = readlinkSync(hostPath);
    } catch {
      // a link removed between lstat and readlink keeps no target
    }
  }
  return e;
}
