// A real S3-compatible server for tests: versitygw (tests/kube/versitygw.ts builds and caches it) with its posix
// backend over a fresh temp dir, on a free loopback port, with random root keys and one bucket made. stop() kills
// it and removes the dir; a runner that exits without calling it kills it from an exit hook, and one killed
// outright takes it along through the parent-death signal (setpriv), as the kube harness's peers do.
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { type Subprocess } from "bun";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { versitygwBinary } from "#tests/kube/versitygw.ts";
import { freePorts } from "#tests/kube/ports.ts";
import { waitFor, GiveUp } from "#tests/support/wait.ts";

export interface S3Server {
  /** `http://127.0.0.1:<port>`: an S3-compatible endpoint, path-style. */
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** A bucket that exists. */
  bucket: string;
  /** The posix backend's root: `<root>/<bucket>/<key>` is the object's file. */
  root: string;
  /** A client signed with the root keys (for setup and for reading back what a test wrote). */
  client: S3Client;
  createBucket(name: string): Promise<void>;
  stop(): Promise<void>;
}

const START_ATTEMPTS = 3; // a free port can be taken between probing and binding
const live = new Set<number>();
process.on("exit", () => {
  for (const pid of live) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {}
  }
});

export async function startS3Server(o: { bucket?: string; region?: string } = {}): Promise<S3Server> {
  const binary = await versitygwBinary();
  let last: unknown;
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
    try {
      return await startOnce(binary, o.bucket ?? "e2b-uploads", o.region ?? "us-east-1");
    } catch (err) {
      last = err;
      if (!/address already in use/i.test(String(err))) break;
    }
  }
  throw last;
}

async function startOnce(binary: string, bucket: string, region: string): Promise<S3Server> {
  const dir = mkdtempSync(join(tmpdir(), "s3-peer-"));
  const root = join(dir, "root");
  mkdirSync(root);
  const [port] = freePorts(1);
  const endpoint = `http://127.0.0.1:${port}`;
  const accessKeyId = `AK${randomBytes(8).toString("hex").toUpperCase()}`;
  const secretAccessKey = randomBytes(24).toString("base64url");
  const logPath = join(dir, "versitygw.log");
  const logFd = openSync(logPath, "w");
  const pdeath = existsSync("/usr/bin/setpriv") ? ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"] : [];
  let proc: Subprocess;
  try {
    proc = Bun.spawn([...pdeath, binary, "--port", `127.0.0.1:${port}`, "--region", region, "--quiet", "posix", root], {
      cwd: dir,
      detached: true,
      stdio: ["ignore", logFd, logFd],
      // Keys through the environment, not argv: `ps` shows argv.
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ROOT_ACCESS_KEY_ID: accessKeyId, ROOT_SECRET_ACCESS_KEY: secretAccessKey },
    });
  } finally {
    closeSync(logFd);
  }
  live.add(proc.pid);
  let stopped = false;
  const client = new S3Client({ region, endpoint, forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } });
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    client.destroy();
    try {
      process.kill(-proc.pid, "SIGKILL");
    } catch {}
    await proc.exited;
    live.delete(proc.pid);
    rmSync(dir, { recursive: true, force: true });
  };
  const log = () => (existsSync(logPath) ? readFileSync(logPath, "utf8").slice(-2000) : "");
  try {
    // Any HTTP answer (403 for an anonymous GET /) means it serves.
    await waitFor(
      "versitygw to listen",
      async () => {
        if (proc.exitCode !== null || proc.signalCode !== null) throw new GiveUp(`versitygw exited (${proc.exitCode ?? proc.signalCode}): ${log()}`);
        const r = await fetch(endpoint, { signal: AbortSignal.timeout(2_000) });
        await r.body?.cancel();
        return true;
      },
      30_000,
      50,
    );
    const createBucket = async (name: string) => {
      await client.send(new CreateBucketCommand({ Bucket: name }), { abortSignal: AbortSignal.timeout(10_000) });
    };
    await createBucket(bucket);
    return { endpoint, region, accessKeyId, secretAccessKey, bucket, root, client, createBucket, stop };
  } catch (err) {
    const tail = log();
    await stop();
    throw new Error(`versitygw did not start: ${(err as Error).message}\n--- log tail ---\n${tail}`);
  }
}
