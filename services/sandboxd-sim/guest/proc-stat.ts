// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// /proc/<pid>/stat read as the kernel writes it: "pid (comm) state ppid pgrp …". comm is the process's own choice
// (prctl(PR_SET_NAME), 15 bytes) and may hold ") " itself: the fields start after the LAST ")", never the first, or a
// sandbox process names its own parent and process group (a host group the simulator, the host's root, then signals).

/** The fields after comm: [0] state, [1] ppid, [2] pgrp, … [19] starttime. Throws when the process is gone. */
export function statFields(stat: string): string[] {
  const end = stat.lastIndexOf(")");
  if (end < 0) throw new Error("not a /proc/<pid>/stat line");
  return stat.slice(end + 2).split(" ");
}
