// The container images' Dockerfiles (images/<binary>/Dockerfile), for builders with Docker. There is no Docker engine
// here; scripts/images.sh builds the shipped images from the same files (build.test.ts checks those). This test
// replays each Dockerfile's build stage (its COPYs from the context, honouring
// .dockerignore, its ARGs and its RUN commands, in order) in a scratch directory, then checks that the file the
// final stage copies exists, runs, names its build, and links nothing the distroless base lacks (glibc only); and
// that the final stage and the chart's Deployments agree on entrypoint and user; and the compiled binary itself
// takes the args the chart renders (no usage error).
// Not covered here: pulling the registry bases and `docker build` itself (scripts/images.sh applies the final stage
// to a Debian-assembled base instead; build.test.ts).
import { describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { E2B, at, container, containerEnv, deployment, merge, render, root } from "#tests/integration/chart/helm.ts";
import { run } from "#tests/support/run.ts";
import { type Stage, parseDockerfile, substitute, unquote } from "#scripts/images/dockerfile.ts";

const IMAGES = ["sandbox-apiserver", "sandbox-envd-proxy", "sandbox-e2b"] as const;
const IN_CHART = new Set(["sandbox-apiserver", "sandbox-envd-proxy"]);
/** The e2b configuration with every optional flag, and the proxy on TLS: the longest arg lists the chart renders. */
const FULL_E2B = merge(
  E2B,
  at("apiserver.e2b", { envdVersion: "0.8.1", defaultTimeoutSeconds: 600, templateAliases: "base img", builds: { enabled: true } }),
  at("apiserver.sandboxdToken.secretName", "sandboxd-token"),
  at("envdProxy.tlsSecretName", "wildcard"),
);
/** What distroless base-nocc holds: glibc and the dynamic loader. */
const GLIBC = /^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|\/lib64\/ld-linux-x86-64\.so\.2|\/lib\/ld-linux-aarch64\.so\.1)$/;

function dockerignore(): Bun.Glob[] {
  return readFileSync(join(root, ".dockerignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"))
    .map((p) => new Bun.Glob(p));
}

interface BuildResult {
  dir: string;
  workdir: string;
  log: string;
}

/** Replays the build stage in a scratch directory standing for the image's filesystem root. */
async function replayBuildStage(stage: Stage, buildArgs: Record<string, string>): Promise<BuildResult> {
  const fsRoot = mkdtempSync(join(tmpdir(), "image-build-"));
  const ignore = dockerignore();
  const ignored = (abs: string) => {
    const rel = relative(root, abs);
    return rel !== "" && ignore.some((g) => g.match(rel));
  };
  let workdir = "/";
  const args = new Map<string, string>();
  let log = "";
  for (const { op, args: text } of stage.instructions) {
    const inImage = (p: string) => join(fsRoot, p.startsWith("/") ? p : join(workdir, p));
    if (op === "WORKDIR") {
      workdir = text;
    } else if (op === "ARG") {
      const [k, v = ""] = text.split("=", 2);
      args.set(k!, buildArgs[k!] ?? unquote(v));
    } else if (op === "COPY") {
      const parts = text.split(/\s+/);
      if (parts.some((p) => p.startsWith("--"))) throw new Error(`build stage COPY with options: ${text}`);
      const dest = parts.pop()!;
      for (const src of parts) {
        const from = join(root, src);
        if (!existsSync(from)) throw new Error(`COPY ${src}: not in the build context`);
        const to = dest.endsWith("/") && !src.endsWith("/") ? join(inImage(dest), src.split("/").pop()!) : inImage(dest);
        cpSync(from, to, { recursive: true, filter: (p) => !ignored(p) });
      }
    } else if (op === "RUN") {
      const env = { PATH: process.env.PATH ?? "", HOME: fsRoot, ...Object.fromEntries(args) };
      const { stdout: o, stderr: e, code } = await run(["sh", "-c", text], { cwd: inImage("."), env });
      log += `$ ${text}\n${o}${e}`;
      if (code !== 0) throw new Error(`RUN ${text} exited ${code}:\n${o}${e}`);
    } else if (op !== "ENV" && op !== "LABEL") {
      throw new Error(`build stage instruction ${op} is not replayed by this test`);
    }
  }
  return { dir: fsRoot, workdir, log };
}

for (const bin of IMAGES) {
  describe(`images/${bin}/Dockerfile`, () => {
    const file = parseDockerfile(readFileSync(join(root, "images", bin, "Dockerfile"), "utf8"));
    const [build, final] = file.stages;
    const finalOp = (op: string) => final!.instructions.find((i) => i.op === op)!.args;

    test("two stages: bun at the project's version, then distroless as non-root with the binary as entrypoint", () => {
      expect(file.stages).toHaveLength(2);
      expect(substitute(build!.from, file.globalArgs)).toBe(`oven/bun:${Bun.version}`);
      expect(build!.name).toBe("build");
      expect(final!.from).toBe("gcr.io/distroless/base-nocc-debian12:nonroot");
      // The OCI labels (scripts/images.sh passes the same build args), then the binary, user, ports, entrypoint.
      expect(final!.instructions.map((i) => i.op)).toEqual(["ARG", "ARG", "ARG", "LABEL", "COPY", "USER", "EXPOSE", "ENTRYPOINT"]);
      expect(finalOp("COPY")).toBe(`--from=build /src/dist/${bin} /usr/local/bin/${bin}`);
      expect(finalOp("USER")).toBe("65532:65532");
      expect(JSON.parse(finalOp("ENTRYPOINT"))).toEqual([`/usr/local/bin/${bin}`]);
      expect(build!.instructions.some((i) => i.op === "RUN" && i.args.includes("bun build") || i.args.includes("scripts/build.ts"))).toBe(true);
    });

    test(
      "the build stage's commands compile the single binary, which runs and links only glibc",
      async () => {
        const b = await replayBuildStage(build!, { BUILD_VERSION: "9.9.9", BUILD_REVISION: "0123456789ab" });
        try {
          if (process.env.SHOW_BUILD_LOG) console.log(b.log);
          const copied = /^--from=build\s+(\S+)\s+\S+$/.exec(finalOp("COPY"))![1]!;
          const binary = join(b.dir, copied);
          expect(existsSync(binary)).toBe(true);
          expect(statSync(binary).mode & 0o111).not.toBe(0);
          // The build stage installs production dependencies only, and nothing else lands next to the binary.
          expect(existsSync(join(b.dir, b.workdir, "node_modules", "typescript"))).toBe(false);

          const version = Bun.spawnSync([binary, "--version"], { cwd: tmpdir(), env: {} });
          expect(version.exitCode).toBe(0);
          expect(version.stdout.toString()).toMatch(new RegExp(`^${bin} 9\\.9\\.9 \\(rev=0123456789ab built=\\S+\\)\\n$`));
          const help = Bun.spawnSync([binary, "--help"], { cwd: tmpdir(), env: {} });
          expect(help.exitCode).toBe(0);

          if (IN_CHART.has(bin)) {
            // The compiled binary's own parser takes the args and env the chart renders (exit 2 is a usage error;
            // past parsing it stops at the missing kube config or mounted file, exit 1).
            const c = container(await render(FULL_E2B), bin);
            const run = Bun.spawnSync([binary, ...(c.args ?? [])], { cwd: tmpdir(), env: containerEnv(c), timeout: 20_000 });
            const err = run.stderr.toString();
            expect(`${run.exitCode} ${err}`).not.toMatch(/^2 /);
            expect(err).not.toContain("--help' for the flag table");
          }

          const ldd = Bun.spawnSync(["ldd", binary]);
          const libs = ldd.stdout
            .toString()
            .split("\n")
            .map((l) => l.trim().split(/\s+/)[0] ?? "")
            .filter((l) => l !== "");
          expect(libs.length).toBeGreaterThan(0);
          for (const lib of libs) expect(`${lib}`).toMatch(GLIBC);
        } finally {
          rmSync(b.dir, { recursive: true, force: true });
        }
      },
      300_000,
    );

    if (IN_CHART.has(bin)) {
      test("the chart's Deployment runs this image's entrypoint as its user", async () => {
        const objects = await render(E2B);
        const user = finalOp("USER").split(":").map(Number);
        const c = container(objects, bin);
        expect(c.image).toBe(`ghcr.io/cocoonstack/${bin}:latest`);
        expect(c.command).toBeUndefined(); // the image's ENTRYPOINT runs; args follow it
        const pod = deployment(objects, bin).template.spec.securityContext!;
        expect(pod).toMatchObject({ runAsNonRoot: true, runAsUser: user[0], runAsGroup: user[1] });
        expect(c.securityContext).toEqual({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
        });
        // The EXPOSEd ports are the chart's default container ports.
        const exposed = finalOp("EXPOSE").split(/\s+/).map(Number).sort();
        expect((c.ports ?? []).map((p) => p.containerPort).sort()).toEqual(exposed);
      });
    }
  });
}
