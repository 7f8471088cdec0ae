// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// envd's `filesystem.Filesystem` Connect service over the sandbox's directory. Error codes follow envd, because
// the SDK branches on them: NotFound (exists() -> false, remove/list of a missing path), AlreadyExists (makeDir
// -> false), InvalidArgument (listing a file). Watching uses fs.watch; a "rename" notice becomes CREATE or REMOVE
// depending on whether the name still exists, "change" becomes WRITE.
import { existsSync, lstatSync, mkdirSync, opendirSync, renameSync, rmSync, statSync, watch, type FSWatcher } from "node:fs";
import { dirname, join } from "node:path";
import { randomUUID } from "node:crypto";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { EventType, FileType, Filesystem, type FilesystemEventSchema } from "./gen/filesystem/filesystem_pb.ts";
import { entryOf, ownerNames, type EntryInit, type OwnerNames } from "./entries.ts";
import { PathError } from "./paths.ts";
import type { GuestSandbox } from "./sandbox.ts";
import { basicUser } from "./request-user.ts";

type FsEventInit = MessageInitShape<typeof FilesystemEventSchema>;

function fsError(e: unknown, path: string): ConnectError {
  if (e instanceof ConnectError) return e;
  if (e instanceof PathError) return new ConnectError(e.message, Code.InvalidArgument);
  const code = (e as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return new ConnectError(`path ${JSON.stringify(path)} not found`, Code.NotFound);
  if (code === "EEXIST") return new ConnectError(`path ${JSON.stringify(path)} already exists`, Code.AlreadyExists);
  if (code === "ENOTDIR") return new ConnectError(`path ${JSON.stringify(path)} is not a directory`, Code.InvalidArgument);
  if (code === "EACCES" || code === "EPERM") return new ConnectError(`permission denied on ${JSON.stringify(path)}`, Code.PermissionDenied);
  return new ConnectError(`${JSON.stringify(path)}: ${(e as Error).message}`, Code.Internal);
}

/**
 * Entries one listing may hold: it is walked synchronously on the event loop every sandbox of the node shares, and
 * "/" at a large depth is the whole tree (the host's /usr below it: ~150k entries, tens of seconds of a stalled node).
 */
export const LIST_MAX_ENTRIES = 10_000;

const tooMany = () => new ConnectError(`the listing has more than ${LIST_MAX_ENTRIES} entries; list a subdirectory or a smaller depth`, Code.InvalidArgument);

/** A directory's names, sorted; read one at a time and refused past what the listing may still hold (a directory of millions). */
function namesIn(dir: string, room: number): string[] {
  const names: string[] = [];
  const d = opendirSync(dir);
  try {
    for (let e = d.readSync(); e !== null; e = d.readSync()) {
      if (names.length >= room) throw tooMany();
      names.push(e.name);
    }
  } finally {
    d.closeSync();
  }
  return names.sort();
}

function listDir(sb: GuestSandbox, dir: string, depth: number, out: EntryInit[], names: OwnerNames = ownerNames(sb.paths)): void {
  for (const name of namesIn(dir, LIST_MAX_ENTRIES - out.length)) {
    if (out.length >= LIST_MAX_ENTRIES) throw tooMany();
    const p = join(dir, name);
    let entry: EntryInit;
    try {
      entry = entryOf(sb.paths, p, sb.metadata, names);
    } catch {
      continue; // removed while listing
    }
    out.push(entry);
    if (depth > 1 && entry.type === FileType.DIRECTORY) listDir(sb, p, depth - 1, out, names);
  }
}

/**
 * Watches one sandbox may hold at once (WatchDir streams and polling watchers together). Each takes inotify watches
 * of the host's root, which every root process of the machine shares (fs.inotify.max_user_watches): the sandbox's
 * own watches are bounded, not only its rate.
 */
export const MAX_WATCHES = 32;
/** Directories a recursive watch may cover (one inotify watch each): "/" is ~20k here, the host's /usr below it. */
export const MAX_RECURSIVE_WATCH_DIRS = 2_000;
/** Events kept for a reader that does not take them (a polling watcher nobody polls, a stream read slowly). */
export const MAX_PENDING_EVENTS = 10_000;

/** Throws once `dir` holds more than MAX_RECURSIVE_WATCH_DIRS directories (itself included), without walking further. */
function boundRecursiveWatch(dir: string, path: string): void {
  let dirs = 0;
  const walk = (d: string) => {
    if (++dirs > MAX_RECURSIVE_WATCH_DIRS) {
      throw new ConnectError(`a recursive watch of ${JSON.stringify(path)} would cover more than ${MAX_RECURSIVE_WATCH_DIRS} directories; watch a smaller tree`, Code.InvalidArgument);
    }
    let h;
    try {
      h = opendirSync(d);
    } catch {
      return; // gone or unreadable: not watched either
    }
    try {
      for (let e = h.readSync(); e !== null; e = h.readSync()) if (e.isDirectory()) walk(join(d, e.name));
    } finally {
      h.closeSync();
    }
  };
  walk(dir);
}

/** Watch a host directory; calls `emit` with envd-shaped events (names relative to the watched directory). */
function watchDirectory(sb: GuestSandbox, dirHost: string, recursive: boolean, includeEntry: boolean, emit: (e: FsEventInit) => void): FSWatcher {
  return watch(dirHost, { recursive }, (kind, filename) => {
    if (!filename) return;
    const name = filename.toString();
    const host = join(dirHost, name);
    const exists = existsSync(host);
    const type = kind === "change" ? EventType.WRITE : exists ? EventType.CREATE : EventType.REMOVE;
    const ev: FsEventInit = { name, type };
    if (includeEntry && exists) {
      try {
        ev.entry = entryOf(sb.paths, host, sb.metadata);
      } catch {
        // gone between the notice and the stat
      }
    }
    emit(ev);
  });
}

function watchedDir(sb: GuestSandbox, path: string): string {
  const host = sb.paths.forFiles(path);
  const st = statSync(host);
  if (!st.isDirectory()) throw new ConnectError(`path ${JSON.stringify(path)} is not a directory`, Code.InvalidArgument);
  return host;
}

interface PollingWatcher {
  watcher: FSWatcher;
  events: FsEventInit[];
  /** Gives the sandbox's watch back (startWatch). */
  end: () => void;
}

export function filesystemService(sb: GuestSandbox, watchers: Map<string, PollingWatcher>): ServiceImpl<typeof Filesystem> {
  let watches = 0;
  /** A watch of this sandbox starts: refused past MAX_WATCHES; the returned function ends it (once). */
  const startWatch = (path: string, recursive: boolean): { dir: string; end: () => void } => {
    const dir = watchedDir(sb, path);
    if (watches >= MAX_WATCHES) throw new ConnectError(`this sandbox already holds ${MAX_WATCHES} directory watches; stop one first`, Code.FailedPrecondition);
    if (recursive) boundRecursiveWatch(dir, path);
    watches++;
    let ended = false;
    return {
      dir,
      end: () => {
        if (!ended) watches--;
        ended = true;
      },
    };
  };
  const resolve = (p: string) => sb.paths.forFiles(p);
  // stat, remove and rename act on a link itself (envd's Lstat, os.RemoveAll, os.Rename); its parents still resolve inside the root.
  const resolveLink = (p: string) => sb.paths.forFiles(p, undefined, { follow: false });
  return {
    stat(req) {
      try {
        return { entry: entryOf(sb.paths, resolveLink(req.path), sb.metadata) };
      } catch (e) {
        throw fsError(e, req.path);
      }
    },

    makeDir(req, ctx) {
      try {
        const host = resolve(req.path);
        if (existsSync(host)) throw new ConnectError(`path ${JSON.stringify(req.path)} already exists`, Code.AlreadyExists);
        sb.makeDirs(host, basicUser(ctx.requestHeader.get("authorization")));
        return { entry: entryOf(sb.paths, host, sb.metadata) };
      } catch (e) {
        throw fsError(e, req.path);
      }
    },

    move(req) {
      try {
        const src = resolveLink(req.source);
        const dst = resolveLink(req.destination);
        lstatSync(src); // NotFound names the source
        mkdirSync(dirname(dst), { recursive: true });
        renameSync(src, dst);
        sb.metadata.move(sb.paths.toGuest(src), sb.paths.toGuest(dst));
        return { entry: entryOf(sb.paths, dst, sb.metadata) };
      } catch (e) {
        throw fsError(e, req.source);
      }
    },

    listDir(req) {
      try {
        const host = resolve(req.path);
        if (!statSync(host).isDirectory()) throw new ConnectError(`path ${JSON.stringify(req.path)} is not a directory`, Code.InvalidArgument);
        const entries: EntryInit[] = [];
        listDir(sb, host, Math.max(1, req.depth), entries);
        return { entries };
      } catch (e) {
        throw fsError(e, req.path);
      }
    },

    remove(req) {
      try {
        const host = resolveLink(req.path);
        if (host === sb.paths.root) throw new ConnectError("refusing to remove the sandbox root", Code.InvalidArgument);
        lstatSync(host);
        rmSync(host, { recursive: true, force: true });
        sb.metadata.remove(sb.paths.toGuest(host));
        return {};
      } catch (e) {
        throw fsError(e, req.path);
      }
    },

    async *watchDir(req, ctx: HandlerContext) {
      let watcher: FSWatcher;
      let end = () => {};
      const queue: FsEventInit[] = [];
      let wake: (() => void) | undefined;
      try {
        const w = startWatch(req.path, req.recursive);
        end = w.end;
        watcher = watchDirectory(sb, w.dir, req.recursive, req.includeEntry, (e) => {
          if (queue.length < MAX_PENDING_EVENTS) queue.push(e);
          wake?.();
        });
      } catch (e) {
        end();
        throw fsError(e, req.path);
      }
      const onAbort = () => wake?.();
      ctx.signal.addEventListener("abort", onAbort);
      const every = Number(ctx.requestHeader.get("keepalive-ping-interval") ?? "");
      let keepalive = false;
      const timer = every > 0 ? setInterval(() => ((keepalive = true), wake?.()), every * 1000) : undefined;
      try {
        yield { event: { case: "start", value: {} } };
        for (;;) {
          while (queue.length) yield { event: { case: "filesystem", value: queue.shift()! } };
          if (keepalive) {
            keepalive = false;
            yield { event: { case: "keepalive", value: {} } };
          }
          if (ctx.signal.aborted) return;
          await new Promise<void>((r) => (wake = r));
          wake = undefined;
        }
      } finally {
        watcher.close();
        end();
        ctx.signal.removeEventListener("abort", onAbort);
        if (timer) clearInterval(timer);
      }
    },

    createWatcher(req) {
      let end = () => {};
      try {
        const w = startWatch(req.path, req.recursive);
        end = w.end;
        const id = randomUUID();
        const events: FsEventInit[] = [];
        const watcher = watchDirectory(sb, w.dir, req.recursive, req.includeEntry, (e) => void (events.length < MAX_PENDING_EVENTS && events.push(e)));
        watchers.set(id, { watcher, events, end });
        return { watcherId: id };
      } catch (e) {
        end();
        throw fsError(e, req.path);
      }
    },

    getWatcherEvents(req) {
      const w = watchers.get(req.watcherId);
      if (!w) throw new ConnectError(`watcher ${JSON.stringify(req.watcherId)} not found`, Code.NotFound);
      return { events: w.events.splice(0) };
    },

    removeWatcher(req) {
      const w = watchers.get(req.watcherId);
      if (!w) throw new ConnectError(`watcher ${JSON.stringify(req.watcherId)} not found`, Code.NotFound);
      w.watcher.close();
      w.end();
      watchers.delete(req.watcherId);
      return {};
    },
  };
}

export type { PollingWatcher };
