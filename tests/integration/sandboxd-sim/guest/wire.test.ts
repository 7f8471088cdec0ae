// The guest agent's wire: our .proto files describe exactly what the stock e2b SDK embeds; both Connect encodings
// (binary protobuf, unary and server-streaming, besides the SDK's JSON) are served; envd's REST routes and their
// credential rules. The guest is reached directly (its own listener); sdk.test.ts covers the relayed path.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { create, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { createEnvelopeReadableStream, encodeEnvelope } from "@connectrpc/connect/protocol";
import { file_process_process, ListRequestSchema, ListResponseSchema, StartRequestSchema, StartResponseSchema } from "#services/sandboxd-sim/guest/gen/process/process_pb.ts";
import { file_filesystem_filesystem } from "#services/sandboxd-sim/guest/gen/filesystem/filesystem_pb.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";

const ROOT = "wire-root";
let sim: SandboxdSim;
let base: string;
const TOKEN = "wire-token";

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, guestAgents: true });
  const r = await fetch(`${sim.url}/v1/claim`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ template: "base" }) });
  const { id } = (await r.json()) as { id: string };
  base = `http://127.0.0.1:${sim.node.guestHost!.target(id, 49983)!.port}`;
});
afterAll(() => sim.stop());

/**
 * A descriptor as comparable JSON: without the java/csharp packaging options and the default JSON names, which
 * the SDK's embedded form drops (neither changes the wire).
 */
function canonical(fd: FileDescriptorProto): string {
  fd.options = undefined;
  return JSON.stringify(toJson(FileDescriptorProtoSchema, fd), (k, v) => (k === "jsonName" ? undefined : v));
}

/** The embedded FileDescriptorProtos (protoc-gen-es output) in a generated source file, keyed by file name. */
function embeddedDescriptors(file: string): Map<string, string> {
  const bundle = readFileSync(join(import.meta.dir, "../../../..", file), "utf8");
  const out = new Map<string, string>();
  for (const m of bundle.matchAll(/fileDesc\("([A-Za-z0-9+/=]+)"/g)) {
    const fd = fromBinary(FileDescriptorProtoSchema, Buffer.from(m[1]!, "base64"));
    out.set(fd.name, canonical(fd));
  }
  return out;
}

test("our process.proto and filesystem.proto describe exactly the messages, fields and services the SDK embeds", () => {
  const sdk = embeddedDescriptors("node_modules/e2b/dist/index.mjs");
  const gen = "services/sandboxd-sim/guest/gen";
  const ours = new Map([...embeddedDescriptors(`${gen}/process/process_pb.ts`), ...embeddedDescriptors(`${gen}/filesystem/filesystem_pb.ts`)]);
  expect([...ours.keys()].sort()).toEqual([file_filesystem_filesystem.name + ".proto", file_process_process.name + ".proto"].sort());
  for (const [name, desc] of ours) {
    expect(sdk.has(name)).toBe(true);
    expect(desc === sdk.get(name)).toBe(true);
  }
});

test("the first /init sets the token; then everything but /health needs it; /envs returns init's env vars", async () => {
  expect((await fetch(`${base}/health`)).status).toBe(204);
  const init = await fetch(`${base}/init`, { method: "POST", body: JSON.stringify({ accessToken: TOKEN, envVars: { A: "1" } }) });
  expect(init.status).toBe(204);
  expect((await fetch(`${base}/health`)).status).toBe(204);
  const noToken = await fetch(`${base}/envs`);
  expect(noToken.status).toBe(401);
  expect(await noToken.json()).toEqual({ code: 401, message: "missing X-Access-Token" });
  expect((await fetch(`${base}/envs`, { headers: { "x-access-token": "nope" } })).status).toBe(401);
  const envs = await fetch(`${base}/envs`, { headers: { "x-access-token": TOKEN } });
  expect(await envs.json()).toEqual({ A: "1" });
  // A re-init with another token and no proof is refused; with the current one it may change settings.
  expect((await fetch(`${base}/init`, { method: "POST", body: JSON.stringify({ accessToken: "other" }) })).status).toBe(401);
  const again = await fetch(`${base}/init`, { method: "POST", headers: { "x-access-token": TOKEN }, body: JSON.stringify({ envVars: { B: "2" } }) });
  expect(again.status).toBe(204);
  expect(await (await fetch(`${base}/envs`, { headers: { "x-access-token": TOKEN } })).json()).toEqual({ A: "1", B: "2" });
  const bad = await fetch(`${base}/init`, { method: "POST", headers: { "x-access-token": TOKEN }, body: JSON.stringify({ envVars: { C: 3 } }) });
  expect(bad.status).toBe(400);
  expect(((await bad.json()) as { message: string }).message).toContain("envVars.C");
});

test("GET /metrics answers envd's metric fields", async () => {
  const m = (await (await fetch(`${base}/metrics`, { headers: { "x-access-token": TOKEN } })).json()) as Record<string, number>;
  for (const k of ["ts", "cpu_count", "cpu_used_pct", "mem_total", "mem_used", "mem_cache", "disk_used", "disk_total"]) expect(typeof m[k]).toBe("number");
  expect(m.cpu_count).toBeGreaterThan(0);
});

test("binary Connect, unary: process.Process/List as application/proto", async () => {
  const r = await fetch(`${base}/process.Process/List`, {
    method: "POST",
    headers: { "content-type": "application/proto", "x-access-token": TOKEN },
    body: toBinary(ListRequestSchema, create(ListRequestSchema)),
  });
  expect(r.status).toBe(200);
  expect(r.headers.get("content-type")).toBe("application/proto");
  expect(fromBinary(ListResponseSchema, new Uint8Array(await r.arrayBuffer())).processes).toEqual([]);
});

test("binary Connect, server stream: process.Process/Start as application/connect+proto yields start, data, end", async () => {
  const req = create(StartRequestSchema, { process: { cmd: "/bin/bash", args: ["-c", "echo binary; exit 4"] }, stdin: false });
  const r = await fetch(`${base}/process.Process/Start`, {
    method: "POST",
    headers: { "content-type": "application/connect+proto", "x-access-token": TOKEN },
    body: encodeEnvelope(0, toBinary(StartRequestSchema, req)),
  });
  expect(r.status).toBe(200);
  const kinds: string[] = [];
  let stdout = "";
  let exit: number | undefined;
  const reader = createEnvelopeReadableStream(r.body!).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (value.flags & 0b10) continue; // end-of-stream frame (JSON trailer)
    const ev = fromBinary(StartResponseSchema, value.data).event?.event;
    if (!ev) continue;
    kinds.push(ev.case!);
    if (ev.case === "data" && ev.value.output.case === "stdout") stdout += new TextDecoder().decode(ev.value.output.value);
    if (ev.case === "end") exit = ev.value.exitCode;
  }
  expect(kinds[0]).toBe("start");
  expect(kinds.at(-1)).toBe("end");
  expect(stdout).toBe("binary\n");
  expect(exit).toBe(4);
});

test("client streaming, JSON: StreamInput (start, then data events) feeds a running process's stdin", async () => {
  const enc = (o: unknown, flags = 0) => encodeEnvelope(flags, new TextEncoder().encode(JSON.stringify(o)));
  const start = await fetch(`${base}/process.Process/Start`, {
    method: "POST",
    headers: { "content-type": "application/connect+json", "x-access-token": TOKEN },
    body: enc({ process: { cmd: "/bin/cat", args: [] }, stdin: true }),
  });
  const reader = createEnvelopeReadableStream(start.body!).getReader();
  const next = async () => JSON.parse(new TextDecoder().decode((await reader.read()).value!.data)) as { event?: Record<string, any> };
  const pid = (await next()).event!.start.pid as number;
  const frames = [enc({ start: { process: { pid } } }), enc({ data: { input: { stdin: Buffer.from("streamed ").toString("base64") } } }), enc({ data: { input: { stdin: Buffer.from("input").toString("base64") } } })];
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const f of frames) c.enqueue(f);
      c.close();
    },
  });
  const si = await fetch(`${base}/process.Process/StreamInput`, {
    method: "POST",
    headers: { "content-type": "application/connect+json", "x-access-token": TOKEN },
    body,
    duplex: "half",
  } as RequestInit);
  expect(si.status).toBe(200);
  await si.arrayBuffer();
  const close = await fetch(`${base}/process.Process/CloseStdin`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-access-token": TOKEN },
    body: JSON.stringify({ process: { pid } }),
  });
  expect(close.status).toBe(200);
  let stdout = "";
  for (;;) {
    const m = await next();
    if (m.event?.data?.stdout) stdout += Buffer.from(m.event.data.stdout as string, "base64").toString();
    if (m.event?.end) break;
  }
  expect(stdout).toBe("streamed input");
});

test("an unknown Connect method is a 404, and a Connect call without the token a 401", async () => {
  expect((await fetch(`${base}/process.Process/Nope`, { method: "POST", headers: { "content-type": "application/json", "x-access-token": TOKEN }, body: "{}" })).status).toBe(404);
  expect((await fetch(`${base}/process.Process/List`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(401);
});

test("bad /files requests are 4xx naming the problem, never 5xx", async () => {
  const h = { "x-access-token": TOKEN };
  await fetch(`${base}/files?path=plain.txt`, { method: "POST", headers: { ...h, "content-type": "application/octet-stream" }, body: "x" });
  const cases: [string, RequestInit, number, string][] = [
    ["/files", { headers: h }, 400, "path is required"],
    ["/files?path=missing.txt", { headers: h }, 404, "not found"],
    ["/files?path=/home/user", { headers: h }, 400, "is a directory"],
    ["/files", { method: "POST", headers: { ...h, "content-type": "application/octet-stream" }, body: "x" }, 400, "path is required"],
    ["/files?path=plain.txt/under-a-file", { method: "POST", headers: { ...h, "content-type": "application/octet-stream" }, body: "x" }, 400, "failed"],
    ["/files?path=x", { method: "POST", headers: { ...h, "content-type": "multipart/form-data; boundary=zz" }, body: "garbage" }, 400, "multipart"],
    ["/files?path=x", { method: "POST", headers: { ...h, "content-type": "application/octet-stream", "content-encoding": "br" }, body: "x" }, 400, "Content-Encoding"],
  ];
  for (const [path, init, status, text] of cases) {
    const r = await fetch(base + path, init);
    expect([path, r.status]).toEqual([path, status]);
    expect(((await r.json()) as { message: string }).message).toContain(text);
  }
});
