// The S3 upload store (e2b.md §6.3, `--e2b-build-store-s3-*`): COPY archives live at
// `<prefix>/e2b-files/<namespace>/<template>/<hash>.tar`; presence is a HEAD, the SDK uploads through a presigned PUT
// valid for an hour, and the executor reads an archive back with GetObject. Everything signs with @aws-sdk's own
// SigV4 and finds credentials through the default Node chain (environment, shared files, web identity for IRSA,
// ECS/EKS pod identity container credentials, IMDS), so this module never holds a key of its own. Each namespace
// is bounded in archives, bytes and unused links (s3-quota.ts), counted from a listing of its own prefix.
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { defaultProvider } from "@aws-sdk/credential-provider-node";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { z } from "zod";
import { E2bError } from "../errors.ts";
import { isS3NotFound, s3Failure } from "./s3-errors.ts";
import { S3Quota, defaultS3Quota, type ListedObject } from "./s3-quota.ts";
import { DEFAULT_BODY_IDLE_MS, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_MAX_GETS_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT, PRESIGN_SECONDS, S3StoreOptionsSchema, s3OptionsFromFlags, type S3Flags, type S3StoreOptions } from "./s3-options.ts";
import type { UploadStore } from "./store.ts";

export { DEFAULT_BODY_IDLE_MS, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_MAX_GETS_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT, PRESIGN_SECONDS, S3StoreOptionsSchema, type S3StoreOptions } from "./s3-options.ts";

// Checked here too, not only in the route: a key is built from these, and `..` or `/` would leave the prefix.
const Segment = z.string().min(1).max(255).regex(/^[^/\\]+$/).refine((s) => s !== "." && s !== "..");
const Hash = z.string().regex(/^[0-9a-f]{64}$/);

/** The size a link reserves when the store was made without --e2b-build-upload-max (the flag's default). */
const DEFAULT_UPLOAD_MAX = 1024 * 1024 * 1024;

export interface S3UploadStore extends UploadStore {
  readonly quota: S3Quota;
  /** The object key of one archive (validated; a 400 E2bError for a segment that could leave the prefix). */
  keyOf(ns: string, template: string, hash: string): string;
  /** The presigned PUT alone, without the HEAD that locate does first. */
  presign(ns: string, template: string, hash: string): Promise<{ url: string; headers: Record<string, string> }>;
}

export function createS3UploadStore(input: S3StoreOptions): S3UploadStore {
  const o = S3StoreOptionsSchema.parse(input);
  const timeoutMs = o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const bodyIdleMs = o.bodyIdleMs ?? DEFAULT_BODY_IDLE_MS;
  const lanes = { link: { max: o.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT, used: 0 }, build: { max: o.maxGetsInFlight ?? DEFAULT_MAX_GETS_IN_FLIGHT, used: 0 } };
  const prefix = (o.prefix ?? "").replace(/^\/+|\/+$/g, "");
  const client = new S3Client({
    region: o.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? "us-east-1",
    ...(o.endpoint ? { endpoint: o.endpoint } : {}),
    forcePathStyle: o.forcePathStyle,
    credentials: defaultProvider(),
    // The SDK's default adds a CRC32 of the (empty) presign-time body to every PutObject, which S3 then demands of
    // the real upload: presigned PUTs would all fail. Checksums only where an operation requires one.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });

  const keyOf = (ns: string, template: string, hash: string): string => {
    const parts = [Segment.safeParse(ns), Segment.safeParse(template), Hash.safeParse(hash)];
    if (parts.some((p) => !p.success)) throw new E2bError(400, "upload store: invalid namespace, template or hash");
    return `${prefix ? `${prefix}/` : ""}e2b-files/${ns}/${template}/${hash}.tar`;
  };

  /**
   * Runs one S3 call under its own deadline; a failure becomes the route's 502/503, a 404 `undefined`. The call gets
   * the abort signal and is also raced against it: the SDK does not pass the signal to every step (a credential
   * provider's fetch, a presign), and the bound must hold for all of them.
   */
  async function bounded<T>(what: string, call: (signal: AbortSignal) => Promise<T>, lane: keyof typeof lanes = "link"): Promise<T | undefined> {
    const l = lanes[lane];
    if (l.used >= l.max) {
      throw new E2bError(503, `upload store: ${what} in bucket ${o.bucket}: ${l.max} S3 calls already in flight; retry`);
    }
    l.used++;
    const ctl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const reason = new DOMException("S3 call timed out", "TimeoutError");
        ctl.abort(reason);
        reject(reason);
      }, timeoutMs);
    });
    const running = call(ctl.signal);
    running.catch(() => {}); // a call that loses the race may still reject later
    try {
      return await Promise.race([running, deadline]);
    } catch (err) {
      if (isS3NotFound(err)) return undefined;
      throw s3Failure(ctl.signal.aborted ? { name: "TimeoutError", message: String(ctl.signal.reason) } : err, `${what} in bucket ${o.bucket}`, timeoutMs);
    } finally {
      clearTimeout(timer);
      l.used--;
    }
  }

  const nsPrefix = (ns: string) => `${prefix ? `${prefix}/` : ""}e2b-files/${ns}/`;
  const uploadMax = o.uploadMax ?? DEFAULT_UPLOAD_MAX;
  const defaults = defaultS3Quota(uploadMax);
  const quota = new S3Quota({ nsBytes: o.nsBytes ?? defaults.nsBytes, nsArchives: o.nsArchives ?? defaults.nsArchives, nsLinks: o.nsLinks ?? defaults.nsLinks }, uploadMax, {
    async list(ns, max) {
      const out: ListedObject[] = [];
      let ContinuationToken: string | undefined;
      do {
        const page = await bounded("LIST", (abortSignal) =>
          client.send(new ListObjectsV2Command({ Bucket: o.bucket, Prefix: nsPrefix(ns), MaxKeys: Math.min(1000, max - out.length), ...(ContinuationToken ? { ContinuationToken } : {}) }), { abortSignal }),
        );
        for (const c of page?.Contents ?? []) if (c.Key) out.push({ key: c.Key, size: c.Size ?? 0, lastModifiedMs: c.LastModified?.getTime() ?? 0 });
        ContinuationToken = page?.IsTruncated ? page.NextContinuationToken : undefined;
      } while (ContinuationToken && out.length < max);
      return out;
    },
    async remove(Key) {
      await bounded("DELETE", (abortSignal) => client.send(new DeleteObjectCommand({ Bucket: o.bucket, Key }), { abortSignal }));
    },
  });

  // Presigning makes no request, but it resolves credentials (a web-identity or container-credentials fetch).
  const presign = async (ns: string, template: string, hash: string) => {
    const Key = keyOf(ns, template, hash);
    const signed = await bounded("presign PUT", () => presignPut(client, o.bucket, Key));
    if (!signed) throw new E2bError(502, `upload store: presign PUT in bucket ${o.bucket}: no URL`);
    return signed;
  };

  return {
    kind: "s3",
    keyOf,
    presign,
    quota,
    async locate(ns, template, hash) {
      const Key = keyOf(ns, template, hash);
      const head = await bounded("HEAD", (abortSignal) => client.send(new HeadObjectCommand({ Bucket: o.bucket, Key }), { abortSignal }));
      if (head) {
        quota.present(ns, Key);
        return { present: true };
      }
      await quota.admitLink(ns, Key, PRESIGN_SECONDS * 1000);
      const signed = await presign(ns, template, hash);
      return Object.keys(signed.headers).length ? { present: false, url: signed.url, headers: signed.headers } : { present: false, url: signed.url };
    },
    async open(ns, template, hash) {
      const Key = keyOf(ns, template, hash);
      const got = await bounded("GET", (abortSignal) => client.send(new GetObjectCommand({ Bucket: o.bucket, Key }), { abortSignal }), "build");
      if (!got) return undefined;
      quota.read(ns, Key);
      if (!got.Body || got.ContentLength === undefined) throw new E2bError(502, `upload store: GET in bucket ${o.bucket}: no body or length`);
      if (o.uploadMax !== undefined && got.ContentLength > o.uploadMax) {
        // Nothing of it is read: the length is in the response head.
        await got.Body.transformToWebStream().cancel().catch(() => {});
        throw new E2bError(413, `the uploaded archive is ${got.ContentLength} bytes, larger than --e2b-build-upload-max (${o.uploadMax})`);
      }
      return { size: got.ContentLength, body: idleBounded(got.Body.transformToWebStream(), bodyIdleMs) };
    },
  };
}

/** The store from the `--e2b-build-store-s3-*` flags: a value it cannot use is a StartupError naming its flag. */
export function createS3UploadStoreFromFlags(s3: S3Flags, uploadMax?: number): S3UploadStore {
  return createS3UploadStore(s3OptionsFromFlags(s3, uploadMax));
}

/**
 * A presigned PUT plus the headers it was signed with (Host aside: the client's fetch sets it from the URL).
 * getSignedUrl returns only the URL, so a build-step middleware on this one command reads the presigned request
 * on its way back out; X-Amz-SignedHeaders in the URL is the list S3 will check.
 */
async function presignPut(client: S3Client, bucket: string, key: string): Promise<{ url: string; headers: Record<string, string> }> {
  const command = new PutObjectCommand({ Bucket: bucket, Key: key });
  let presignedHeaders: Record<string, string> = {};
  command.middlewareStack.add(
    (next) => async (args) => {
      const out = await next(args);
      const presigned = (out.output as { presigned?: { headers?: Record<string, string> } }).presigned;
      presignedHeaders = presigned?.headers ?? {};
      return out;
    },
    { step: "build", name: "e2bCapturePresignedHeaders" },
  );
  const url = await getSignedUrl(client, command, { expiresIn: PRESIGN_SECONDS });
  const signed = new Set((new URL(url).searchParams.get("X-Amz-SignedHeaders") ?? "").split(";").filter(Boolean));
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(presignedHeaders)) {
    const lower = name.toLowerCase();
    if (lower !== "host" && signed.has(lower)) headers[name] = value;
  }
  return { url, headers };
}

/** The body as a stream that errors (and cancels the source) when no chunk arrives for `idleMs`. */
function idleBounded(source: ReadableStream<Uint8Array>, idleMs: number): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const stalled = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`upload store: S3 body stalled for ${idleMs} ms`)), idleMs);
      });
      try {
        const r = await Promise.race([reader.read(), stalled]);
        if (r.done) ctl.close();
        else ctl.enqueue(r.value);
      } catch (err) {
        void reader.cancel(err).catch(() => {});
        ctl.error(err);
      } finally {
        clearTimeout(timer);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}
