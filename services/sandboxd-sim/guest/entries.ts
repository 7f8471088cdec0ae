// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// envd's EntryInfo for a host path: name, type, guest path, size, permission bits, Go-style permission string
// ("drwxr-xr-x"), owner and group names, modification time and a symlink's target.
import { lstatSync, readlinkSync, type Stats } from "node:fs";
import { userInfo } from "node:os";
import { basename } from "node:path";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { FileType, type EntryInfoSchema } from "./gen/filesystem/filesystem_pb.ts";
import type { GuestPaths } from "./paths.ts";

export type EntryInit = MessageInitShape<typeof EntryInfoSchema>;

const me = (() => {
  try {
    const u = userInfo();
    return { uid: u.uid, gid: u.gid, name: u.username };
  } catch {
    return { uid: -1, gid: -1, name: "" };
  }
})();

// Commands run as the host user, so every file is that user's; other ids show as numbers.
const ownerName = (uid: number) => (uid === me.uid ? me.name : String(uid));
const groupName = (gid: number) => (gid === me.gid ? me.name : String(gid));

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

/** lstat-based entry for a host path inside the sandbox (throws the fs error, e.g. ENOENT). */
export function entryOf(paths: GuestPaths, hostPath: string): EntryInit {
  const st = lstatSync(hostPath);
  const e: EntryInit = {
    name: basename(hostPath),
    type: fileTypeOf(st),
    path: paths.toGuest(hostPath),
    size: BigInt(st.size),
    mode: st.mode & 0o7777,
    permissions: permissionString(st),
    owner: ownerName(st.uid),
    group: groupName(st.gid),
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
