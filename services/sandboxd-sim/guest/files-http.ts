// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// envd's `GET /files` (download) and `POST /files` (upload) on the sandbox's directory.
//   GET  ?path=…            the file's bytes; 404 missing, 400 a directory
//   POST ?path=…            multipart/form-data, one or more `file` parts (destination: `path`, else each part's
//                           filename), or application/octet-stream (optionally Content-Encoding: gzip) streamed to
//                           `path`; `X-Metadata-*` headers set each file's metadata (metadata.ts). Answers
//                           [{name, type: "file", path, metadata?}] per written file.
// Paths are guest paths (relative = under /home/user). Errors are envd's `{code, message}` JSON.
import { mkdirSync, statSync } from "node:fs";
import { basename, dirname } from "node:path";
import type { Context } from "hono";
import { PathError } from "./paths.ts";
import { MetadataError, metadataFromHeaders } from "./metadata.ts";
import type { GuestSandbox } from "./sandbox.ts";
import { basicUser } from "./request-user.ts";

export const envdError = (status: number, message: string) => Response.json({ code: status, message }, { status });

function resolveOr400(sb: GuestSandbox, path: string): string | Response {
  try {
    return sb.paths.forFiles(path);
  } catch (e) {
    if (e instanceof PathError) return envdError(400, e.message);
    throw e;
  }
}

export async function downloadFile(sb: GuestSandbox, c: Context): Promise<Response> {
  const path = c.req.query("path") ?? "";
  if (path === "") return envdError(400, "query parameter path is required");
  const host = resolveOr400(sb, path);
  if (host instanceof Response) return host;
  let size: number;
  try {
    const st = statSync(host);
    if (st.isDirectory()) return envdError(400, `path ${JSON.stringify(path)} is a directory`);
    size = st.size;
  } catch {
    return envdError(404, `file ${JSON.stringify(path)} not found`);
  }
  return new Response(Bun.file(host), {
    headers: {
      "content-type": "application/octet-stream",
      "content-length": String(size),
      "content-disposition": `attachment; filename=${JSON.stringify(basename(host))}`,
    },
  });
}

interface Written {
  name: string;
  type: "file";
  path: string;
  metadata?: Record<string, string>;
}

/** Write one file and give it the upload's metadata (replacing what it had). */
async function writeTo(sb: GuestSandbox, host: string, body: Blob | ReadableStream<Uint8Array>, meta: Record<string, string>, user: string | undefined): Promise<Written> {
  const madeFrom = mkdirSync(dirname(host), { recursive: true });
  await Bun.write(host, new Response(body));
  sb.chownUp(host, madeFrom ?? host, user);
  const path = sb.paths.toGuest(host);
  sb.metadata.set(path, meta);
  return { name: basename(host), type: "file", path, ...(Object.keys(meta).length ? { metadata: meta } : {}) };
}

export async function uploadFiles(sb: GuestSandbox, c: Context): Promise<Response> {
  const path = c.req.query("path");
  const user = c.req.query("username") || basicUser(c.req.header("authorization"));
  const type = (c.req.header("content-type") ?? "").toLowerCase();
  const written: Written[] = [];
  let meta: Record<string, string>;
  try {
    meta = metadataFromHeaders(c.req.raw.headers);
  } catch (e) {
    if (e instanceof MetadataError) return envdError(400, e.message);
    throw e;
  }
  if (type.startsWith("multipart/form-data")) {
    let form: FormData;
    try {
      form = await c.req.raw.formData();
    } catch (e) {
      return envdError(400, `invalid multipart body: ${(e as Error).message}`);
    }
    const parts = form.getAll("file").filter((p): p is File => typeof p !== "string");
    if (parts.length === 0) return envdError(400, "multipart body has no file part");
    for (const part of parts) {
      const dest = path || part.name;
      if (!dest) return envdError(400, "a file part has no filename and the query names no path");
      const host = resolveOr400(sb, dest);
      if (host instanceof Response) return host;
      if (isDirectory(host)) return envdError(400, `path ${JSON.stringify(dest)} is a directory`);
      try {
        written.push(await writeTo(sb, host, part, meta, user));
      } catch (e) {
        return envdError(400, `upload of ${JSON.stringify(dest)} failed: ${(e as Error).message}`);
      }
    }
    return Response.json(written);
  }
  if (!path) return envdError(400, "query parameter path is required for an octet-stream upload");
  const host = resolveOr400(sb, path);
  if (host instanceof Response) return host;
  if (isDirectory(host)) return envdError(400, `path ${JSON.stringify(path)} is a directory`);
  const raw = c.req.raw.body ?? new Blob([]).stream();
  const encoding = (c.req.header("content-encoding") ?? "").toLowerCase();
  if (encoding !== "" && encoding !== "identity" && encoding !== "gzip") return envdError(400, `unsupported Content-Encoding ${JSON.stringify(encoding)}`);
  const body = encoding === "gzip" ? raw.pipeThrough(new DecompressionStream("gzip")) : raw;
  try {
    written.push(await writeTo(sb, host, body, meta, user));
  } catch (e) {
    return envdError(400, `upload of ${JSON.stringify(path)} failed: ${(e as Error).message}`);
  }
  return Response.json(written);
}

function isDirectory(host: string): boolean {
  try {
    return statSync(host).isDirectory();
  } catch {
    return false;
  }
}
