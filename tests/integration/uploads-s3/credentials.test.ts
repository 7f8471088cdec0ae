// The S3 store finds its credentials through @aws-sdk's default Node chain, as seed 003 says, and the real server
// (versitygw) is the judge of every source: environment variables, a shared credentials file with AWS_PROFILE, pod
// identity / ECS container credentials (a loopback credentials endpoint with its authorization token), and web
// identity as IRSA sets it (a token file and a role, exchanged at an STS stand-in named by AWS_ENDPOINT_URL_STS).
// A wrong secret and a chain that finds nothing are clear 502/503 errors that never carry the secret.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createS3UploadStore } from "#shared/e2b/uploads/s3.ts";
import { startS3Server, type S3Server } from "#tests/support/s3/server.ts";
import { caught, withAwsEnv } from "./env.ts";

let s3: S3Server;
let dir: string;
beforeAll(async () => {
  s3 = await startS3Server();
  dir = mkdtempSync(join(tmpdir(), "s3-creds-"));
});
afterAll(async () => {
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const origin = { baseUrl: "http://e2b.example.test" };
let n = 0;
const freshHash = () => createHash("sha256").update(`creds-${++n}-${Math.random()}`).digest("hex");
const store = () => createS3UploadStore({ bucket: s3.bucket, endpoint: s3.endpoint, forcePathStyle: true });

/** locate (a signed HEAD), a PUT through the presigned URL, locate again: the server accepted both signatures. */
async function roundTrip(): Promise<void> {
  const s = store();
  const hash = freshHash();
  const link = await s.locate("team-a", "creds", hash, origin);
  if (link.present) throw new Error("unexpectedly present");
  const put = await fetch(link.url, { method: "PUT", body: "archive", headers: link.headers });
  expect(put.status).toBe(200);
  await put.body?.cancel();
  expect(await s.locate("team-a", "creds", hash, origin)).toEqual({ present: true });
}

describe("credentials from the default AWS chain, judged by a real S3 server", () => {
  test("environment: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY", async () => {
    await withAwsEnv({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey }, roundTrip);
  });

  test("shared credentials file: AWS_SHARED_CREDENTIALS_FILE with AWS_PROFILE picks that profile over [default]", async () => {
    const file = join(dir, "credentials");
    writeFileSync(
      file,
      `[default]\naws_access_key_id = ${s3.accessKeyId}\naws_secret_access_key = not-the-secret\n\n` +
        `[builds]\naws_access_key_id = ${s3.accessKeyId}\naws_secret_access_key = ${s3.secretAccessKey}\n`,
    );
    await withAwsEnv({ AWS_SHARED_CREDENTIALS_FILE: file, AWS_PROFILE: "builds" }, roundTrip);
    // The same file without AWS_PROFILE reads [default], whose secret is wrong: the server says no.
    const err = await withAwsEnv({ AWS_SHARED_CREDENTIALS_FILE: file }, () => caught(store().locate("team-a", "creds", freshHash(), origin)));
    expect(err.status).toBe(502);
  });

  test("pod identity / container credentials: the full URI and its authorization token", async () => {
    const seen: (string | null)[] = [];
    const endpoint = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        seen.push(req.headers.get("authorization"));
        const expiration = new Date(Date.now() + 3600_000).toISOString();
        // Token is required by the SDK's parser; empty here because versitygw has no STS and refuses any session
        // token (HTTP 400). What this proves is the chain's source; AWS itself checks real session tokens.
        return Response.json({ AccessKeyId: s3.accessKeyId, SecretAccessKey: s3.secretAccessKey, Token: "", Expiration: expiration });
      },
    });
    try {
      await withAwsEnv(
        { AWS_CONTAINER_CREDENTIALS_FULL_URI: `http://127.0.0.1:${endpoint.port}/v1/credentials`, AWS_CONTAINER_AUTHORIZATION_TOKEN: "pod-token" },
        roundTrip,
      );
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((h) => h === "pod-token")).toBe(true);
    } finally {
      endpoint.stop(true);
    }
  });

  test("web identity (IRSA): AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, exchanged at STS", async () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, "projected-sa-token");
    const calls: URLSearchParams[] = [];
    const sts = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      async fetch(req) {
        const form = new URLSearchParams(await req.text());
        calls.push(form);
        const expiration = new Date(Date.now() + 3600_000).toISOString();
        return new Response(
          `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>` +
            `<Credentials><AccessKeyId>${s3.accessKeyId}</AccessKeyId><SecretAccessKey>${s3.secretAccessKey}</SecretAccessKey>` +
            // No SessionToken, as in the container case: versitygw refuses session tokens it did not issue.
            `<Expiration>${expiration}</Expiration></Credentials>` +
            `</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`,
          { headers: { "content-type": "text/xml" } },
        );
      },
    });
    try {
      await withAwsEnv(
        {
          AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile,
          AWS_ROLE_ARN: "arn:aws:iam::123456789012:role/e2b-builds",
          AWS_ENDPOINT_URL_STS: `http://127.0.0.1:${sts.port}`,
          AWS_REGION: "us-east-1",
        },
        roundTrip,
      );
      expect(calls.length).toBeGreaterThan(0);
      expect(calls[0]!.get("Action")).toBe("AssumeRoleWithWebIdentity");
      expect(calls[0]!.get("RoleArn")).toBe("arn:aws:iam::123456789012:role/e2b-builds");
      expect(calls[0]!.get("WebIdentityToken")).toBe("projected-sa-token");
    } finally {
      sts.stop(true);
    }
  });
});

describe("credential failures", () => {
  test("a wrong secret: locate and open answer 502 'S3 refused this server's credentials', and no text holds the secret", async () => {
    const wrong = randomBytes(24).toString("base64url");
    await withAwsEnv({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: wrong }, async () => {
      // Thunks, not promises: a second call started before the first is awaited would reject unobserved meanwhile.
      for (const call of [() => store().locate("team-a", "creds", freshHash(), origin), () => store().open("team-a", "creds", freshHash())]) {
        const err = await caught(call());
        expect(err.status).toBe(502);
        expect(err.message).toMatch(/^upload store: (HEAD|GET) in bucket e2b-uploads: S3 refused this server's credentials \(HTTP 403\)$/);
        for (const text of [err.message, err.detail ?? "", JSON.stringify(err)]) {
          expect(text).not.toContain(wrong);
          expect(text).not.toContain(s3.secretAccessKey);
        }
      }
    });
  });

  test("a credentials endpoint that never answers: 503 within the call bound, not a hang", async () => {
    const hung = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Promise<Response>(() => {}) });
    try {
      await withAwsEnv({ AWS_CONTAINER_CREDENTIALS_FULL_URI: `http://127.0.0.1:${hung.port}/v1/credentials` }, async () => {
        const s = createS3UploadStore({ bucket: s3.bucket, endpoint: s3.endpoint, forcePathStyle: true, callTimeoutMs: 500 });
        const started = performance.now();
        const err = await caught(s.locate("team-a", "creds", freshHash(), origin));
        expect(err.status).toBe(503);
        expect(err.message).toBe("upload store: HEAD in bucket e2b-uploads: S3 did not answer within 500 ms");
        expect(performance.now() - started).toBeLessThan(5_000);
        // The presign alone resolves credentials too, and is bounded the same way.
        const presign = await caught(s.presign("team-a", "creds", freshHash()));
        expect(presign.status).toBe(503);
      });
    } finally {
      hung.stop(true);
    }
  });

  test("no credentials anywhere in the chain: 503 'no AWS credentials found by the default chain'", async () => {
    await withAwsEnv({}, async () => {
      const err = await caught(store().locate("team-a", "creds", freshHash(), origin));
      expect(err.status).toBe(503);
      expect(err.message).toBe("upload store: HEAD in bucket e2b-uploads: no AWS credentials found by the default chain");
    });
  });
});
