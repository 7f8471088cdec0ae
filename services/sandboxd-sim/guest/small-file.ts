// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// Reading a small file the sandbox controls (its /etc/passwd, /etc/group) on the simulator's own event loop, which
// every sandbox of the node shares: opened without blocking (a FIFO would wait for a writer forever), refused unless
// a regular file (a link to /dev/zero never ends), and read up to a bound (a sparse file of gigabytes). Root inside
// can make any of these.
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";

/** Bytes read at most: an /etc/passwd of ~10k users. */
export const SMALL_FILE_MAX_BYTES = 1024 * 1024;

export class NotRegularFile extends Error {}

/** The first `max` bytes of `path` as UTF-8; throws NotRegularFile for anything but a regular file, fs errors as they are. */
export function readSmallFile(path: string, max = SMALL_FILE_MAX_BYTES): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new NotRegularFile(`${path} is not a regular file`);
    const buf = Buffer.alloc(Math.min(st.size, max));
    let n = 0;
    while (n < buf.length) {
      const r = readSync(fd, buf, n, buf.length - n, n);
      if (r === 0) break;
      n += r;
    }
    return buf.subarray(0, n).toString("utf8");
  } finally {
    closeSync(fd);
  }
}
