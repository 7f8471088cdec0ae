// apiserver.e2b.builds (issue 19 item 6): each combination renders the flags, volume, environment and ServiceAccount
// annotations it should, and its args then go through sandbox-apiserver's own flag parser and startup checks, so the
// binary accepts exactly what the chart passes. Both upload stores at once, an emptyDir shared by several replicas,
// and keys without a bucket fail the render with a message naming the values; values.schema.json refuses mistyped
// durations, endpoints and bucket names.
import { describe, expect, test } from "bun:test";
import { checkApiserverConfig, parseApiserverFlags, type ApiserverConfig } from "#services/sandbox-apiserver/flags.ts";
import { E2B, at, container, containerEnv, deployment, find, merge, render, template, type Container, type Values } from "./helm.ts";

const BUILDS = (b: Values): Values => merge(E2B, at("apiserver.e2b.builds", { enabled: true, ...b }));
const ONE_REPLICA = at("apiserver.replicaCount", 1);

function apiserverConfig(c: Container): ApiserverConfig {
  const outcome = parseApiserverFlags(c.args ?? [], containerEnv(c));
  if (outcome.kind !== "run") throw new Error(`sandbox-apiserver parsed ${outcome.kind}, not run`);
  checkApiserverConfig(outcome.config);
  return outcome.config;
}

const buildArgs = (c: Container) => (c.args ?? []).filter((a) => a.startsWith("--e2b-build"));

async function failsWith(values: Values, message: string): Promise<void> {
  const r = await template(values);
  expect(r.code).not.toBe(0);
  expect(r.stdout).toBe("");
  expect(r.stderr).toContain(message);
}

describe("apiserver.e2b.builds renders", () => {
  test("builds on, no store: parallel, timeout and log lines at the binary's defaults; no volume, no AWS env", async () => {
    const objects = await render(BUILDS({}));
    const c = container(objects, "sandbox-apiserver");
    expect(buildArgs(c)).toEqual(["--e2b-builds", "--e2b-build-parallel=2", "--e2b-build-timeout=30m", "--e2b-build-log-lines=10000"]);
    expect(deployment(objects, "sandbox-apiserver").template.spec.volumes?.map((v) => v.name)).not.toContain("e2b-builds");
    expect((c.env ?? []).map((e) => e.name).filter((n) => n.startsWith("AWS_"))).toEqual([]);
    const config = apiserverConfig(c).e2b.builds;
    expect(config).toMatchObject({ enabled: true, parallel: 2, timeoutMs: 30 * 60_000, logLines: 10_000, dir: undefined });
    expect(config.s3.bucket).toBeUndefined();
    // The build affinity the seed names: on the e2b Service only.
    expect((find(objects, "Service", "sandbox-apiserver-e2b").spec as Values).sessionAffinity).toBe("ClientIP");
    expect((find(objects, "Service", "sandbox-apiserver").spec as Values).sessionAffinity).toBeUndefined();
  });

  test("parallel, timeout and log lines as set", async () => {
    const c = container(await render(BUILDS({ parallel: 6, timeout: "1h30m", logLines: 2_000_000 })), "sandbox-apiserver");
    expect(buildArgs(c)).toEqual(["--e2b-builds", "--e2b-build-parallel=6", "--e2b-build-timeout=1h30m", "--e2b-build-log-lines=2000000"]);
    expect(apiserverConfig(c).e2b.builds).toMatchObject({ parallel: 6, timeoutMs: 90 * 60_000, logLines: 2_000_000 });
  });

  test("directory store on an emptyDir (one replica): --e2b-build-dir on a writable volume, the upload cap, fsGroup", async () => {
    const objects = await render(merge(BUILDS({ dir: { enabled: true, sizeLimit: "20Gi", uploadMax: 5_368_709_120 } }), ONE_REPLICA));
    const c = container(objects, "sandbox-apiserver");
    expect(buildArgs(c).slice(4)).toEqual(["--e2b-build-dir=/var/lib/sandbox-apiserver/e2b-builds", "--e2b-build-upload-max=5368709120"]);
    const spec = deployment(objects, "sandbox-apiserver").template.spec;
    expect(spec.volumes?.find((v) => v.name === "e2b-builds")).toEqual({ name: "e2b-builds", emptyDir: { sizeLimit: "20Gi" } });
    expect(c.volumeMounts?.find((m) => m.name === "e2b-builds")).toEqual({ name: "e2b-builds", mountPath: "/var/lib/sandbox-apiserver/e2b-builds" });
    expect(spec.securityContext?.fsGroup).toBe(65532);
    const config = apiserverConfig(c).e2b.builds;
    expect(config.dir).toBe("/var/lib/sandbox-apiserver/e2b-builds");
    expect(config.uploadMax).toBe(5_368_709_120);
  });

  test("directory store on an existing claim: any replica count, the claim as the volume, its own mount path", async () => {
    const objects = await render(BUILDS({ dir: { enabled: true, existingClaim: "e2b-builds-rwx", mountPath: "/data/builds" } }));
    const spec = deployment(objects, "sandbox-apiserver").template.spec;
    expect(deployment(objects, "sandbox-apiserver").replicas).toBe(2);
    expect(spec.volumes?.find((v) => v.name === "e2b-builds")).toEqual({ name: "e2b-builds", persistentVolumeClaim: { claimName: "e2b-builds-rwx" } });
    const c = container(objects, "sandbox-apiserver");
    expect(c.volumeMounts?.find((m) => m.name === "e2b-builds")?.mountPath).toBe("/data/builds");
    expect(apiserverConfig(c).e2b.builds.dir).toBe("/data/builds");
  });

  test("S3 store with every setting and static keys from a Secret", async () => {
    const objects = await render(
      BUILDS({
        s3: {
          bucket: "e2b-uploads",
          prefix: "tenants/prod",
          endpoint: "https://minio.storage.svc:9000",
          region: "eu-west-1",
          forcePathStyle: true,
          credentialsSecret: { name: "s3-keys", accessKeyIdKey: "id", secretAccessKeyKey: "secret" },
        },
      }),
    );
    const c = container(objects, "sandbox-apiserver");
    expect(buildArgs(c).slice(4)).toEqual([
      "--e2b-build-store-s3-bucket=e2b-uploads",
      "--e2b-build-store-s3-prefix=tenants/prod",
      "--e2b-build-store-s3-endpoint=https://minio.storage.svc:9000",
      "--e2b-build-store-s3-region=eu-west-1",
      "--e2b-build-store-s3-force-path-style",
    ]);
    const aws = (c.env ?? []).filter((e) => e.name.startsWith("AWS_"));
    expect(aws).toEqual([
      { name: "AWS_ACCESS_KEY_ID", valueFrom: { secretKeyRef: { name: "s3-keys", key: "id" } } },
      { name: "AWS_SECRET_ACCESS_KEY", valueFrom: { secretKeyRef: { name: "s3-keys", key: "secret" } } },
    ]);
    expect(deployment(objects, "sandbox-apiserver").template.spec.volumes?.map((v) => v.name)).not.toContain("e2b-builds");
    expect(apiserverConfig(c).e2b.builds.s3).toEqual({
      bucket: "e2b-uploads",
      prefix: "tenants/prod",
      endpoint: "https://minio.storage.svc:9000",
      region: "eu-west-1",
      forcePathStyle: true,
    });
  });

  test("S3 store on AWS through IRSA: only the bucket flag, no keys in the pod, the role on the ServiceAccount", async () => {
    const role = "arn:aws:iam::123456789012:role/e2b-builds";
    const objects = await render(merge(BUILDS({ s3: { bucket: "e2b-uploads" } }), at("apiserver.serviceAccount.annotations", { "eks.amazonaws.com/role-arn": role })));
    const c = container(objects, "sandbox-apiserver");
    expect(buildArgs(c).slice(4)).toEqual(["--e2b-build-store-s3-bucket=e2b-uploads"]);
    expect((c.env ?? []).map((e) => e.name).filter((n) => n.startsWith("AWS_"))).toEqual([]);
    expect(find(objects, "ServiceAccount", "sandbox-apiserver").metadata.annotations).toEqual({ "eks.amazonaws.com/role-arn": role });
    expect(apiserverConfig(c).e2b.builds.s3).toMatchObject({ bucket: "e2b-uploads", prefix: "", forcePathStyle: false });
  });

  test("no ServiceAccount annotations by default", async () => {
    expect(find(await render(E2B), "ServiceAccount", "sandbox-apiserver").metadata.annotations).toBeUndefined();
  });

  test("store values while builds are off render nothing of builds (and refuse nothing)", async () => {
    const values = merge(E2B, at("apiserver.e2b.builds", { enabled: false, dir: { enabled: true }, s3: { bucket: "e2b-uploads" } }));
    const c = container(await render(values), "sandbox-apiserver");
    expect(buildArgs(c)).toEqual([]);
    expect(c.volumeMounts?.map((m) => m.name)).not.toContain("e2b-builds");
  });
});

describe("apiserver.e2b.builds render-time refusals", () => {
  test("both upload stores at once", () =>
    failsWith(
      merge(BUILDS({ dir: { enabled: true, existingClaim: "c" }, s3: { bucket: "e2b-uploads" } })),
      "apiserver.e2b.builds.dir.enabled and apiserver.e2b.builds.s3.bucket are exclusive: choose one upload store",
    ));

  test("an emptyDir directory store with more than one replica", () =>
    failsWith(
      BUILDS({ dir: { enabled: true } }),
      "apiserver.e2b.builds.dir without existingClaim is an emptyDir, which only works with apiserver.replicaCount 1",
    ));

  test("S3 keys without a bucket", () =>
    failsWith(BUILDS({ s3: { credentialsSecret: { name: "s3-keys" } } }), "apiserver.e2b.builds.s3.credentialsSecret.name needs apiserver.e2b.builds.s3.bucket"));

  const schema: [string, Values, string][] = [
    ["a timeout that is no Go duration", BUILDS({ timeout: "30 minutes" }), "/apiserver/e2b/builds/timeout"],
    ["negative log lines", BUILDS({ logLines: -1 }), "/apiserver/e2b/builds/logLines"],
    ["an upload cap of 0", BUILDS({ dir: { uploadMax: 0 } }), "/apiserver/e2b/builds/dir/uploadMax"],
    ["a relative mount path", BUILDS({ dir: { mountPath: "builds" } }), "/apiserver/e2b/builds/dir/mountPath"],
    ["an endpoint without a scheme", BUILDS({ s3: { bucket: "e2b-uploads", endpoint: "s3.example.com" } }), "/apiserver/e2b/builds/s3/endpoint"],
    ["a bucket name S3 refuses", BUILDS({ s3: { bucket: "Bad_Bucket" } }), "/apiserver/e2b/builds/s3/bucket"],
    ["forcePathStyle as a string", BUILDS({ s3: { bucket: "e2b-uploads", forcePathStyle: "true" } }), "/apiserver/e2b/builds/s3/forcePathStyle"],
    ["a misspelt store key", BUILDS({ s3: { bukket: "x" } }), "bukket"],
  ];
  for (const [name, values, path] of schema) {
    test(`schema: ${name}`, async () => {
      const r = await template(values);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("values don't meet the specifications of the schema");
      expect(r.stderr).toContain(path);
    });
  }
});
