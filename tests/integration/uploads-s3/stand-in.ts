// A stand-in e2b API for the SDKs' COPY upload path, without the build API: it answers the calls a build makes
// (POST /v3/templates, GET /templates/{id}/files/{hash} through a real S3 store's locate, the build start, and a
// status that is `ready` at once), and hands out the presigned URL through a recording hop in front of the S3 server. The hop keeps
// what the SDK's PUT carried and passes it on unchanged to the host the URL was signed for, so the signature holds.
import type { UploadStore } from "#shared/e2b/uploads/store.ts";

export interface SeenPut {
  path: string;
  headers: Record<string, string>;
  bytes: Uint8Array;
  status: number;
}

export interface BuildStart {
  templateID: string;
  body: { steps: { type: string; args: string[]; filesHash?: string }[] };
}

export interface StandIn {
  apiUrl: string;
  puts: SeenPut[];
  starts: BuildStart[];
  stop(): void;
}

export function startStandIn(store: UploadStore, s3Endpoint: string, namespace: string): StandIn {
  const puts: SeenPut[] = [];
  const starts: BuildStart[] = [];
  const hop = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const bytes = new Uint8Array(await req.arrayBuffer());
      const headers = Object.fromEntries(req.headers.entries());
      const forwarded: Record<string, string> = {};
      for (const [k, v] of Object.entries(headers)) if (k !== "host" && k !== "connection") forwarded[k] = v;
      const r = await fetch(`${s3Endpoint}${url.pathname}${url.search}`, { method: req.method, headers: forwarded, body: bytes });
      const text = await r.text();
      puts.push({ path: url.pathname, headers, bytes, status: r.status });
      return new Response(text, { status: r.status });
    },
  });
  const api = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const parts = url.pathname.split("/").filter(Boolean);
      if (req.method === "POST" && url.pathname === "/v3/templates") {
        const { name } = (await req.json()) as { name: string };
        return Response.json({ templateID: name, buildID: crypto.randomUUID(), public: true, names: [name], tags: [], aliases: [name] }, { status: 202 });
      }
      if (req.method === "GET" && parts[0] === "templates" && parts[2] === "files") {
        const link = await store.locate(namespace, parts[1]!, parts[3]!, { baseUrl: url.origin });
        if (link.present) return Response.json(link, { status: 201 });
        const signed = new URL(link.url);
        return Response.json({ ...link, url: `http://127.0.0.1:${hop.port}${signed.pathname}${signed.search}` }, { status: 201 });
      }
      if (req.method === "POST" && parts[0] === "v2" && parts[3] === "builds") {
        starts.push({ templateID: parts[2]!, body: (await req.json()) as BuildStart["body"] });
        return new Response(null, { status: 202 });
      }
      // A build the stand-in never runs reports ready at once, so a client that waits (the CLI) finishes.
      if (req.method === "GET" && parts[0] === "templates" && parts[2] === "builds" && parts[4] === "status") {
        return Response.json({ templateID: parts[1], buildID: parts[3], status: "ready", logs: [], logEntries: [] });
      }
      return Response.json({ code: 404, message: `stand-in: no ${req.method} ${url.pathname}` }, { status: 404 });
    },
  });
  return {
    apiUrl: `http://127.0.0.1:${api.port}`,
    puts,
    starts,
    stop() {
      api.stop(true);
      hop.stop(true);
    },
  };
}

/**
 * Entry names and sizes of a (plain) tar archive: 512-byte headers, ustar prefix joined, size in octal. PAX extended
 * headers (type `x`/`g`, which Python's tarfile writes before entries) are skipped, not listed.
 */
export function tarEntries(tar: Uint8Array): Map<string, number> {
  const out = new Map<string, number>();
  const text = (from: number, len: number) => new TextDecoder().decode(tar.subarray(from, from + len)).replace(/\0.*$/s, "");
  for (let off = 0; off + 512 <= tar.length; ) {
    const name = text(off, 100);
    if (!name) break;
    const prefix = text(off + 345, 155);
    const size = parseInt(text(off + 124, 12).trim() || "0", 8);
    const type = text(off + 156, 1);
    if (type !== "x" && type !== "g") out.set(prefix ? `${prefix}/${name}` : name, size);
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}
