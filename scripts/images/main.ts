// Builds the control plane's container images for linux/amd64 and linux/arm64 with no Docker daemon, and writes one
// OCI image index per image (an OCI archive any registry client can push: `skopeo copy oci-archive:… docker://…`).
// Entry: `bash scripts/images.sh` (the release workflow and the tests call the same command).
//
//   bash scripts/images.sh [--arch amd64,arm64] [--image sandbox-apiserver,…] [--tag T] [--out DIR]
//                          [--push REGISTRY/OWNER [--push-tag T2 …]]
//
// Per image, from images/<image>/Dockerfile: the build stage is `bun build --compile` (here: scripts/build.ts
// --arch, the same flags; the arm64 runtime is the one Bun publishes on npm), and the final stage's instructions are
// applied with buildah to a base assembled from Debian's packages of the same arch (scripts/images/base.ts) in
// place of distroless base-nocc, which cannot be pulled here. The arm64 binary is run (`--version`) under
// qemu-user-static against the arm64 base before it is packed. Output in DIR (default dist/images):
// <image>.oci.tar (the index, tagged T) and images.json (digests, sizes, labels).
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { revision } from "../lib/build-identity.ts";
import { ensureHostPackages } from "../lib/host-packages.ts";
import { buildBase } from "./base.ts";
import { Buildah } from "./buildah.ts";
import type { Arch } from "./debian.ts";
import { type Stage, parseDockerfile, parseLabels, splitArg, substitute } from "./dockerfile.ts";
import { type ImageReport, readOciArchive } from "./oci.ts";

export const IMAGES = ["sandbox-apiserver", "sandbox-envd-proxy", "sandbox-e2b"] as const;
export const ARCHES: readonly Arch[] = ["amd64", "arm64"];
const root = join(import.meta.dir, "..", "..");
const log = (line: string) => console.error(`images: ${line}`);

interface Options {
  arches: Arch[];
  images: string[];
  tag: string;
  out: string;
  push?: string;
  pushTags: string[];
}

function usage(msg: string): never {
  console.error(`images: ${msg}\nusage: bash scripts/images.sh [--arch amd64,arm64] [--image NAME,…] [--tag T] [--out DIR] [--push REGISTRY/OWNER [--push-tag T …]]`);
  process.exit(2);
}

function parseOptions(argv: string[]): Options {
  const version = process.env.BUILD_VERSION || (JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version as string);
  const o: Options = { arches: [...ARCHES], images: [...IMAGES], tag: version, out: join(root, "dist", "images"), pushTags: [] };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => argv[++i] ?? usage(`${flag} needs a value`);
    if (flag === "--arch") {
      const a = value().split(",");
      for (const x of a) if (!ARCHES.includes(x as Arch)) usage(`--arch: ${JSON.stringify(x)} is not one of ${ARCHES.join(", ")}`);
      o.arches = a as Arch[];
    } else if (flag === "--image") {
      const a = value().split(",");
      for (const x of a) if (!(IMAGES as readonly string[]).includes(x)) usage(`--image: ${JSON.stringify(x)} is not one of ${IMAGES.join(", ")}`);
      o.images = a;
    } else if (flag === "--tag") o.tag = value();
    else if (flag === "--out") o.out = value();
    else if (flag === "--push") o.push = value().replace(/\/+$/, "");
    else if (flag === "--push-tag") o.pushTags.push(value());
    else usage(`unknown argument ${JSON.stringify(flag)}`);
  }
  // An OCI tag: the registry would refuse anything else after the upload.
  for (const t of [o.tag, ...o.pushTags]) if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(t)) usage(`tag ${JSON.stringify(t)} is not a valid image tag`);
  return o;
}

async function sh(argv: string[], env: Record<string, string> = {}): Promise<string> {
  const p = Bun.spawn(argv, { cwd: root, stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${argv.join(" ")} exited ${code}: ${`${out}${err}`.trim().split("\n").slice(-6).join(" | ")}`);
  return out;
}

/** Runs a binary for `arch` with `--version` (arm64 under qemu-user-static with the arm64 base as its root). */
async function proveRuns(binary: string, arch: Arch, baseRootfs: string): Promise<string> {
  const native = process.arch === "x64" ? "amd64" : process.arch === "arm64" ? "arm64" : process.arch;
  const argv = arch === native ? [binary, "--version"] : [`qemu-${arch === "arm64" ? "aarch64" : "x86_64"}-static`, "-L", baseRootfs, binary, "--version"];
  return (await sh(argv)).trim();
}

/** The final stage's instructions applied to a working container; returns the label map it set. */
async function applyFinalStage(buildah: Buildah, ctr: string, stage: Stage, name: string, binary: string, vars: Map<string, string>): Promise<void> {
  const args = new Map(vars);
  let copied = false;
  for (const { op, args: raw } of stage.instructions) {
    const text = substitute(raw, args);
    if (op === "ARG") {
      const [k, v] = splitArg(raw);
      if (!args.has(k)) args.set(k, v ?? "");
    } else if (op === "COPY") {
      const m = /^--from=build\s+\/src\/dist\/(\S+)\s+(\S+)$/.exec(text);
      if (!m || m[1] !== name) throw new Error(`images/${name}/Dockerfile: the final stage's COPY must be "--from=build /src/dist/${name} <dest>", got ${JSON.stringify(text)}`);
      await buildah.run(["copy", "--chmod", "0755", ctr, binary, m[2]!]);
      copied = true;
    } else if (op === "USER") await buildah.run(["config", "--user", text, ctr]);
    else if (op === "EXPOSE") {
      // As Docker records them: "<port>/tcp" when the Dockerfile names no protocol (buildah would keep "8080").
      for (const p of text.split(/\s+/)) await buildah.run(["config", "--port", p.includes("/") ? p : `${p}/tcp`, ctr]);
    }
    else if (op === "ENTRYPOINT") {
      JSON.parse(text); // exec form only: a shell form would need a shell the image does not have
      await buildah.run(["config", "--entrypoint", text, "--cmd", "", ctr]);
    } else if (op === "LABEL") for (const [k, v] of parseLabels(text)) await buildah.run(["config", "--label", `${k}=${v}`, ctr]);
    else if (op === "ENV") await buildah.run(["config", "--env", text.replace(/\s+/, "="), ctr]);
    else if (op === "WORKDIR") await buildah.run(["config", "--workingdir", text, ctr]);
    else throw new Error(`images/${name}/Dockerfile: final-stage instruction ${op} is not applied by scripts/images (no RUN: the base has no shell)`);
  }
  if (!copied) throw new Error(`images/${name}/Dockerfile: the final stage copies no binary`);
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const started = performance.now();
  await ensureHostPackages(
    [
      { pkg: "buildah", probe: "buildah" },
      { pkg: "qemu-user-static", probe: "qemu-aarch64-static" },
      { pkg: "debian-archive-keyring", probe: "/usr/share/keyrings/debian-archive-keyring.gpg" },
    ],
    log,
  );
  const cache = join(process.env.SANDBOX_CACHE || join(process.env.HOME ?? "/root", ".cache", "sandbox-control-plane"), "images");
  const buildah = new Buildah(join(cache, "storage"));
  const rev = revision(root);
  const version = o.tag;
  const builtAt = process.env.BUILD_TIME || new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
  const source = process.env.BUILD_SOURCE || "https://github.com/cocoonstack/sandbox-control-plane";
  const vars = new Map([
    ["BUILD_VERSION", version],
    ["BUILD_REVISION", rev],
    ["BUILD_TIME", builtAt],
    ["BUILD_SOURCE", source],
  ]);
  mkdirSync(o.out, { recursive: true });

  const bases = new Map<Arch, string>();
  for (const arch of o.arches) {
    const t0 = performance.now();
    await sh([process.execPath, "run", "scripts/build.ts", "--arch", arch, ...o.images], { BUILD_VERSION: version, BUILD_REVISION: rev, BUILD_TIME: builtAt });
    log(`${arch}: compiled ${o.images.join(", ")} in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
    const t1 = performance.now();
    const base = await buildBase(buildah, arch, cache, log);
    bases.set(arch, base.name);
    log(`${arch}: base ${base.name} in ${((performance.now() - t1) / 1000).toFixed(1)}s`);
    for (const name of o.images) {
      const printed = await proveRuns(join(root, "dist", `linux-${arch}`, name), arch, base.rootfs);
      const want = `${name} ${version} (rev=${rev} built=${builtAt})`;
      if (printed !== want) throw new Error(`dist/linux-${arch}/${name} --version printed ${JSON.stringify(printed)}, want ${JSON.stringify(want)}`);
      log(`${arch}: ${name} --version: ${printed}${arch === "arm64" && process.arch !== "arm64" ? " (qemu-aarch64-static)" : ""}`);
    }
  }

  const reports: ImageReport[] = [];
  for (const name of o.images) {
    const stages = parseDockerfile(readFileSync(join(root, "images", name, "Dockerfile"), "utf8")).stages;
    const final = stages.at(-1)!;
    const list = `localhost/${name}:${o.tag}`;
    await buildah.removeIfPresent("manifest rm", list);
    await buildah.removeIfPresent("rmi", list);
    await buildah.run(["manifest", "create", list]);
    for (const arch of o.arches) {
      const ctr = await buildah.run(["from", "--pull=never", "--arch", arch, bases.get(arch)!]);
      try {
        await applyFinalStage(buildah, ctr, final, name, join(root, "dist", `linux-${arch}`, name), vars);
        const image = `localhost/${name}:${o.tag}-${arch}`;
        await buildah.removeIfPresent("rmi", image);
        await buildah.run(["commit", "--quiet", "--omit-history", "--timestamp", "0", ctr, image]);
        await buildah.run(["manifest", "add", "--arch", arch, "--os", "linux", list, `containers-storage:${image}`]);
      } finally {
        await buildah.run(["rm", ctr]).catch(() => undefined);
      }
    }
    const archive = join(o.out, `${name}.oci.tar`);
    rmSync(archive, { force: true });
    await buildah.run(["manifest", "push", "--all", "--quiet", list, `oci-archive:${archive}:${o.tag}`]);
    const report = await readOciArchive(archive, name, o.tag);
    reports.push(report);
    log(`${name}:${o.tag} → ${archive} (${(statSync(archive).size / 1e6).toFixed(1)} MB): ${report.platforms.map((p) => `${p.platform} ${(p.compressedBytes / 1e6).toFixed(1)} MB compressed, ${(p.uncompressedBytes / 1e6).toFixed(1)} MB unpacked`).join("; ")}`);
    if (o.push) {
      for (const tag of [o.tag, ...o.pushTags]) {
        const dest = `docker://${o.push}/${name}:${tag}`;
        await buildah.run(["manifest", "push", "--all", "--quiet", list, dest]);
        log(`pushed ${dest}`);
      }
    }
  }
  writeFileSync(join(o.out, "images.json"), `${JSON.stringify({ version, revision: rev, builtAt, source, images: reports }, null, 2)}\n`);
  log(`done in ${((performance.now() - started) / 1000).toFixed(1)}s; ${join(o.out, "images.json")}`);
}

if (import.meta.main) {
  main().catch((err: unknown) => {
    console.error(`images: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
