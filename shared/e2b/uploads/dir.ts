// The directory upload store (docs/e2b.md "COPY uploads"): archives at `<dir>/<ns>/<template>/<hash>.tar`, written
// through this surface's own PUT, signed with the envd secret so it carries no API key:
//   sig = hex HMAC-SHA256(secret, "e2b-upload\0<ns>\0<template>\0<hash>\0<expires>"), valid for an hour.
// The body streams to a temp file in the target directory with the byte bound enforced as it arrives (never held
// in memory), then is linked into place: a reader never sees a partial archive. An archive once stored is never
// overwritten (a PUT to it is a 200 that reads nothing): the SDK only PUTs what `locate` said is absent. Each
// namespace is bounded in bytes, archives and PUTs in flight (dir-quota.ts, which keeps the count: a PUT does not
// read the directory); a template folder left empty is removed.
import { createHmac, randomBytes } from "node:crypto";
import { createWriteStream, linkSync, mkdirSync, openSync, rmSync, statSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { type Clock, realClock } from "../../clock/index.ts";
import { safeEqual } from "../tokens.ts";
import { DirQuota, type DirQuotaLimits, defaultDirQuota, removeIfEmpty } from "./dir-quota.ts";
import type { UploadStore } from "./store.ts";

export const UPLOAD_URL_TTL_S = 3600;
const DIR_MODE = 0o750;

export function uploadSignature(secret: string, ns: string, template: string, hash: string, expires: number): string {
  return createHmac("sha256", secret).update(`e2b-upload\0${ns}\0${template}\0${hash}\0${expires}`).digest("hex");
}

export type PutOutcome = { status: 200 } | { status: 401 | 413 | 400 | 429; message: string };

export class DirUploadStore implements UploadStore {
  readonly kind = "dir" as const;
  readonly quota: DirQuota;

  constructor(
    readonly dir: string,
    private readonly secret: string,
    readonly uploadMax: number,
    private readonly clock: Clock = realClock,
    limits: DirQuotaLimits = defaultDirQuota(uploadMax),
  ) {
    this.quota = new DirQuota(dir, limits, () => this.clock.now());
  }

  /** Create the directory (0750); a failure is the startup refusal of docs/e2b.md. */
  static ensureDir(dir: string): void {
    mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  }

  private path(ns: string, template: string, hash: string): string {
    return join(this.dir, ns, template, `${hash}.tar`);
  }

  async locate(ns: string, template: string, hash: string, origin: { baseUrl: string }) {
    if (existsFile(this.path(ns, template, hash))) return { present: true as const };
    const expires = Math.floor(this.clock.now() / 1000) + UPLOAD_URL_TTL_S;
    const sig = uploadSignature(this.secret, ns, template, hash, expires);
    const q = new URLSearchParams({ ns, expires: String(expires), sig });
    return { present: false as const, url: `${origin.baseUrl}/templates/${encodeURIComponent(template)}/files/${hash}?${q}` };
  }

  async open(ns: string, template: string, hash: string) {
    const p = this.path(ns, template, hash);
    let size: number;
    try {
      const st = statSync(p);
      if (!st.isFile()) return undefined;
      size = st.size;
    } catch {
      return undefined;
    }
    // A read marks the archive in use: quota eviction skips recent ones.
    const now = new Date(this.clock.now());
    try {
      utimesSync(p, now, now);
      this.quota.touched(ns, p);
    } catch {
      // removed meanwhile: the stream below fails the COPY with its reason
    }
    return { size, body: Bun.file(p).stream() };
  }

  /** Check a PUT's signature and expiry (constant-time compare); undefined when it may write. */
  verify(ns: string, template: string, hash: string, expiresText: string, sig: string): string | undefined {
    if (!/^\d{1,12}$/.test(expiresText)) return "invalid upload signature";
    const expires = Number(expiresText);
    if (!safeEqual(sig, uploadSignature(this.secret, ns, template, hash, expires))) return "invalid upload signature";
    if (expires * 1000 < this.clock.now()) return "upload link expired";
    return undefined;
  }

  /**
   * Stream `body` into the archive's place: 413 as soon as more than uploadMax bytes arrived (or were declared),
   * the temp file removed on any failure.
   */
  async write(ns: string, template: string, hash: string, declared: number | undefined, body: ReadableStream<Uint8Array> | null): Promise<PutOutcome> {
    if (declared !== undefined && declared > this.uploadMax) return { status: 413, message: `upload larger than ${this.uploadMax} bytes` };
    const target = this.path(ns, template, hash);
    // Stored once: a second PUT (a racing build's, or a replayed link) changes nothing.
    if (existsFile(target)) {
      await body?.cancel().catch(() => undefined);
      return { status: 200 };
    }
    const admitted = this.quota.admit(ns, declared ?? this.uploadMax);
    if (!admitted.ok) {
      await body?.cancel().catch(() => undefined);
      return { status: 429, message: admitted.message };
    }
    try {
      const out = await this.stream(target, ns, template, hash, body);
      if ("stored" in out && out.stored !== undefined) this.quota.stored(ns, target, out.stored);
      return out.status === 200 ? { status: 200 } : out;
    } finally {
      admitted.done();
    }
  }

  /** The body into `target`; `stored` is the bytes this PUT linked there (undefined: a racing PUT stored it first). */
  private async stream(target: string, ns: string, template: string, hash: string, body: ReadableStream<Uint8Array> | null): Promise<Exclude<PutOutcome, { status: 200 }> | { status: 200; stored: number | undefined }> {
    const folder = join(this.dir, ns, template);
    const temp = join(folder, `.${hash}.${randomBytes(6).toString("hex")}.part`);
    const out = createWriteStream("", { fd: openTemp(folder, temp), mode: 0o640 });
    const failed = new Promise<never>((_, reject) => out.once("error", reject));
    failed.catch(() => undefined);
    let bytes = 0;
    try {
      if (body) {
        const reader = body.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          bytes += value.byteLength;
          if (bytes > this.uploadMax) {
            await reader.cancel().catch(() => undefined);
            throw new TooLarge();
          }
          if (!out.write(value)) await Promise.race([new Promise((r) => out.once("drain", r)), failed]);
        }
      }
      await Promise.race([new Promise<void>((r, j) => out.end((err?: Error | null) => (err ? j(err) : r()))), failed]);
      // link, not rename: a racing PUT that stored the archive first keeps it (EEXIST), atomically.
      let stored: number | undefined = bytes;
      try {
        linkSync(temp, target);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        stored = undefined;
      }
      rmSync(temp, { force: true });
      return { status: 200, stored };
    } catch (err) {
      await new Promise<void>((r) => {
        if (out.closed) return r();
        out.once("close", () => r());
        out.destroy();
      });
      rmSync(temp, { force: true });
      // Nothing else in it (a first PUT of the template that failed): no empty folder stays behind.
      if (removeIfEmpty(folder)) removeIfEmpty(join(this.dir, ns));
      if (err instanceof TooLarge) return { status: 413, message: `upload larger than ${this.uploadMax} bytes` };
      throw err;
    }
  }
}

class TooLarge extends Error {}

/**
 * Create the template folder and the temp file in it. Another process's eviction may remove the folder, emptied, in
 * between (dir-quota.ts removes empty folders): then both are made again, once.
 */
function openTemp(folder: string, temp: string): number {
  for (let attempt = 0; ; attempt++) {
    mkdirSync(folder, { recursive: true, mode: DIR_MODE });
    try {
      return openSync(temp, "wx", 0o640);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || attempt > 0) throw err;
    }
  }
}

function existsFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}
