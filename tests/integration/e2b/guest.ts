// A test guest standing in for envd behind the simulator's ports relay (attached as `*`, so every sandbox's port
// 49983 reaches it). It records what arrives, and offers the shapes the relay must carry: a server stream, a
// streamed upload that is counted (never held), a generated download of any size, an echo of the request.
export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: unknown;
}

export interface TestGuest {
  port: number;
  requests: RecordedRequest[];
  inits: { accessToken?: string; envVars?: Record<string, string>; defaultUser?: string }[];
  /** Answer /init with this status instead of 204 (e.g. 500). */
  initStatus: number;
  /** Requests still streaming a body (for leak checks). */
  openStreams(): number;
  stop(): Promise<void>;
}

export async function startTestGuest(): Promise<TestGuest> {
  const requests: RecordedRequest[] = [];
  const inits: TestGuest["inits"] = [];
  let open = 0;
  const files = new Map<string, Uint8Array<ArrayBuffer>>();
  const g: Partial<TestGuest> = { requests, inits, initStatus: 204 };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    async fetch(req) {
      const url = new URL(req.url);
      const headers: Record<string, string> = {};
      req.headers.forEach((v, k) => (headers[k] = v));
      const rec: RecordedRequest = { method: req.method, path: url.pathname + url.search, headers };
      requests.push(rec);
      if (url.pathname === "/health") return new Response(null, { status: 204 });
      if (url.pathname === "/init" && req.method === "POST") {
        const body = await req.json();
        rec.body = body;
        inits.push(body as TestGuest["inits"][number]);
        return new Response(null, { status: g.initStatus! });
      }
      if (url.pathname === "/metrics") {
        return Response.json({ ts: Math.floor(Date.now() / 1000), cpu_count: 2, cpu_used_pct: 12.5, mem_total: 1073741824, mem_used: 268435456, mem_cache: 1024, disk_used: 2048, disk_total: 4096 });
      }
      if (url.pathname === "/files") {
        // envd's file REST, just enough for the SDK's files.write/read: multipart or raw bodies kept in memory.
        const path = url.searchParams.get("path") ?? "";
        if (req.method === "POST") {
          const type = req.headers.get("content-type") ?? "";
          const data = type.startsWith("multipart/")
            ? new Uint8Array(await ((await req.formData()).get("file") as Blob).arrayBuffer())
            : new Uint8Array(await req.arrayBuffer());
          files.set(path, data);
          return Response.json([{ name: path.split("/").pop(), type: "file", path }]);
        }
        const data = files.get(path);
        if (!data) return Response.json({ code: 404, message: `path '${path}' does not exist` }, { status: 404 });
        return new Response(data, { headers: { "content-type": "application/octet-stream" } });
      }
      if (url.pathname === "/upload") {
        // Count the body as it streams; never hold it.
        open++;
        let bytes = 0;
        try {
          for await (const chunk of req.body ?? []) bytes += (chunk as Uint8Array).byteLength;
        } finally {
          open--;
        }
        return Response.json({ bytes });
      }
      if (url.pathname === "/download") {
        const size = Number(url.searchParams.get("size") ?? "0");
        const chunk = new Uint8Array(64 * 1024).fill(97);
        let sent = 0;
        open++;
        const stream = new ReadableStream<Uint8Array>({
          pull(ctrl) {
            if (sent >= size) {
              open--;
              ctrl.close();
              return;
            }
            const n = Math.min(chunk.byteLength, size - sent);
            sent += n;
            ctrl.enqueue(n === chunk.byteLength ? chunk : chunk.subarray(0, n));
          },
          cancel() {
            open--;
          },
        });
        return new Response(stream, { headers: { "content-type": "application/octet-stream" } });
      }
      if (url.pathname === "/stream") {
        // A server stream: one frame every `gap` ms, `n` frames.
        const n = Number(url.searchParams.get("n") ?? "3");
        const gap = Number(url.searchParams.get("gap") ?? "100");
        let i = 0;
        open++;
        const stream = new ReadableStream<Uint8Array>({
          async pull(ctrl) {
            if (i >= n) {
              open--;
              ctrl.close();
              return;
            }
            if (i > 0) await Bun.sleep(gap);
            ctrl.enqueue(new TextEncoder().encode(`frame ${i++} ${Date.now()}\n`));
          },
          cancel() {
            open--;
          },
        });
        return new Response(stream, { headers: { "content-type": "application/connect+json" } });
      }
      const text = req.method === "GET" || req.method === "HEAD" ? "" : await req.text();
      return Response.json({ method: req.method, path: url.pathname, query: url.search, headers, body: text });
    },
  });
  g.port = server.port!;
  g.openStreams = () => open;
  g.stop = async () => void (await server.stop(true));
  return g as TestGuest;
}

/** A request body of `size` bytes made on demand in 256 KiB chunks (never held whole), for the guest's /upload. */
export function generatedBody(size: number, fill: number): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(256 * 1024).fill(fill);
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(ctrl) {
      if (sent >= size) return ctrl.close();
      const n = Math.min(chunk.byteLength, size - sent);
      sent += n;
      ctrl.enqueue(n === chunk.byteLength ? chunk : chunk.subarray(0, n));
    },
  });
}

/** Bytes of a response body, counted as they stream (never held whole). */
export async function countedBytes(res: Response): Promise<number> {
  let got = 0;
  for await (const c of res.body!) got += (c as Uint8Array).byteLength;
  return got;
}
