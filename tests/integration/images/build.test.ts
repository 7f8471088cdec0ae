// The images as they ship: `bash scripts/images.sh` (the release workflow's command) builds sandbox-apiserver,
// sandbox-envd-proxy and sandbox-e2b for linux/amd64 and linux/arm64 with buildah on a base assembled from Debian's
// packages. Each archive must be one OCI image index with both platforms; each platform's config must be what its
// Dockerfile's final stage says (entrypoint, user, ports, OCI labels), so the Dockerfile and the script cannot
// drift; its files what distroless base-nocc holds and no shell; and the image must run: amd64 under runc (a real
// container runtime) as 65532 on a read-only root, arm64 under qemu-user-static with the image's own glibc.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OciLayout, type PlatformReport } from "#scripts/images/oci.ts";
import { parseDockerfile, parseLabels, substitute } from "#scripts/images/dockerfile.ts";
import { type BuiltImages, IMAGE_NAMES, builtImages } from "#tests/support/images.ts";
import { run } from "#tests/support/run.ts";

const root = join(import.meta.dir, "..", "..", "..");
let images: BuiltImages;
const scratch = mkdtempSync(join(tmpdir(), "images-test-"));

beforeAll(async () => {
  images = await builtImages();
  console.log(`images built in ${images.seconds.toFixed(0)} s`);
  for (const r of images.reports) {
    for (const p of r.platforms) console.log(`image ${r.image}:${r.tag} ${p.platform}: ${(p.compressedBytes / 1e6).toFixed(1)} MB compressed, ${(p.uncompressedBytes / 1e6).toFixed(1)} MB unpacked`);
  }
}, 1_800_000);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every layer of one platform unpacked into a fresh directory: the image's root filesystem. */
async function unpack(archive: string, p: PlatformReport, into: string): Promise<string[]> {
  const layout = await OciLayout.open(archive);
  const paths: string[] = [];
  try {
    for (const layer of layout.manifest(p.manifestDigest).layers) {
      const tarFile = join(into, "..", `${p.platform.replace("/", "-")}.layer.tar`);
      writeFileSync(tarFile, layout.layerTar(layer));
      const list = await run(["tar", "-tvf", tarFile]);
      paths.push(...list.stdout.split("\n").filter(Boolean));
      const x = await run(["tar", "-xpf", tarFile, "-C", into, "--same-owner"]);
      if (x.code !== 0) throw new Error(`unpack ${p.platform}: ${x.stderr}`);
      rmSync(tarFile);
    }
  } finally {
    layout.close();
  }
  return paths;
}

const ELF_MACHINE: Record<string, number> = { "linux/amd64": 62, "linux/arm64": 183 };
const LOADER: Record<string, string> = { "linux/amd64": "lib64/ld-linux-x86-64.so.2", "linux/arm64": "lib/ld-linux-aarch64.so.1" };

for (const name of IMAGE_NAMES) {
  describe(`image ${name}`, () => {
    const final = parseDockerfile(readFileSync(join(root, "images", name, "Dockerfile"), "utf8")).stages.at(-1)!;
    const instr = (op: string) => final.instructions.filter((i) => i.op === op).map((i) => i.args);
    const report = () => images.reports.find((r) => r.image === name)!;

    test("one OCI image index holding linux/amd64 and linux/arm64", async () => {
      const layout = await OciLayout.open(images.archive(name));
      try {
        const { digest, index } = layout.index(images.tag);
        expect(digest).toBe(report().indexDigest);
        expect(index.manifests.map((m) => `${m.platform?.os}/${m.platform?.architecture}`).sort()).toEqual(["linux/amd64", "linux/arm64"]);
      } finally {
        layout.close();
      }
    });

    test("each platform's config is the Dockerfile's final stage: entrypoint, user, ports and OCI labels", () => {
      const vars = new Map([
        ["BUILD_VERSION", images.tag],
        ["BUILD_REVISION", images.revision],
        ["BUILD_SOURCE", "https://github.com/cocoonstack/sandbox-control-plane"],
      ]);
      const labels = Object.fromEntries(instr("LABEL").flatMap((l) => parseLabels(substitute(l, vars))));
      expect(labels["org.opencontainers.image.version"]).toBe(images.tag);
      expect(labels["org.opencontainers.image.revision"]).toMatch(/^[0-9a-f]{12}(-dirty)?$/);
      expect(labels["org.opencontainers.image.source"]).toMatch(/^https:\/\//);
      for (const p of report().platforms) {
        const c = p.config.config;
        expect(p.config.os).toBe("linux");
        expect(c.Entrypoint).toEqual(JSON.parse(instr("ENTRYPOINT")[0]!));
        expect(c.Cmd ?? []).toEqual([]);
        expect(c.User).toBe(instr("USER")[0]);
        expect(c.User).toBe("65532:65532");
        expect(Object.keys(c.ExposedPorts ?? {}).sort()).toEqual(instr("EXPOSE")[0]!.split(/\s+/).map((x) => `${x}/tcp`).sort());
        expect(c.Labels ?? {}).toMatchObject(labels);
      }
    });

    for (const platform of ["linux/amd64", "linux/arm64"]) {
      test(`${platform}: distroless base-nocc's files and no shell; the binary is for ${platform} and runs`, async () => {
        const p = report().platforms.find((x) => x.platform === platform)!;
        const dir = mkdtempSync(join(scratch, `${name}-${platform.replace("/", "-")}-`));
        const fsRoot = join(dir, "rootfs");
        await run(["mkdir", "-p", fsRoot]);
        const listing = await unpack(images.archive(name), p, fsRoot);
        const has = (path: string) => listing.some((l) => l.endsWith(` ./${path}`) || l.endsWith(` ${path}`) || new RegExp(` \\.?/?${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/?( ->|$)`).test(l));
        for (const path of [`usr/local/bin/${name}`, LOADER[platform]!, "etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", "usr/share/zoneinfo/UTC", "etc/services", "tmp"]) {
          expect(`${path}: ${has(path)}`).toBe(`${path}: true`);
        }
        for (const shell of ["bin/sh", "bin/bash", "bin/dash", "usr/bin/sh", "usr/bin/apt", "usr/bin/dpkg"]) expect(`${shell}: ${has(shell)}`).toBe(`${shell}: false`);
        expect(readFileSync(join(fsRoot, "etc/passwd"), "utf8")).toContain("nonroot:x:65532:65532:");
        expect(readFileSync(join(fsRoot, "etc/ssl/certs/ca-certificates.crt"), "utf8").match(/BEGIN CERTIFICATE/g)!.length).toBeGreaterThan(100);
        const elf = readFileSync(join(fsRoot, "usr/local/bin", name));
        expect(elf.readUInt16LE(18)).toBe(ELF_MACHINE[platform]!);

        const want = new RegExp(`^${name} ${images.tag.replace(/\./g, "\\.")} \\(rev=${images.revision} built=\\S+\\)$`);
        if (platform === "linux/arm64") {
          // The image's own arm64 glibc and loader, under user-mode emulation.
          const r = await run(["qemu-aarch64-static", "-L", fsRoot, join(fsRoot, "usr/local/bin", name), "--version"], { timeoutMs: 120_000 });
          expect(`${r.code} ${r.stdout.trim()} ${r.stderr}`).toMatch(new RegExp(`^0 ${want.source.slice(1, -1)} $`));
        } else {
          // A real container runtime: runc, the image's user and entrypoint, a read-only root, no capabilities.
          const spec = await run(["runc", "spec", "--bundle", dir]);
          expect(spec.code).toBe(0);
          const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
          const [uid, gid] = p.config.config.User!.split(":").map(Number);
          config.process.terminal = false;
          config.process.user = { uid, gid };
          config.process.args = [...(p.config.config.Entrypoint ?? []), "--version"];
          config.process.env = p.config.config.Env ?? [];
          config.process.capabilities = { bounding: [], effective: [], permitted: [], ambient: [] };
          config.process.noNewPrivileges = true;
          config.root = { path: "rootfs", readonly: true };
          writeFileSync(join(dir, "config.json"), JSON.stringify(config));
          const id = `images-test-${name}-${process.pid}`;
          const r = await run(["runc", "run", "--bundle", dir, id], { timeoutMs: 120_000 });
          await run(["runc", "delete", "--force", id]);
          expect(`${r.code} ${r.stdout.trim()} ${r.stderr}`).toMatch(new RegExp(`^0 ${want.source.slice(1, -1)} $`));
        }
        rmSync(dir, { recursive: true, force: true });
      }, 300_000);
    }
  });
}
