// Reads what scripts/images wrote: an OCI archive (a tar of an OCI image layout) holding one image index. Used for
// the build's report (digests, sizes, config per platform) and by the tests that check the images.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";

const Descriptor = z.object({
  mediaType: z.string(),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  size: z.number().int().nonnegative(),
  platform: z.object({ architecture: z.string(), os: z.string() }).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});
const Index = z.object({ schemaVersion: z.literal(2), mediaType: z.string().optional(), manifests: z.array(Descriptor) });
const Manifest = z.object({ schemaVersion: z.literal(2), config: Descriptor, layers: z.array(Descriptor) });
export const ImageConfig = z.object({
  architecture: z.string(),
  os: z.string(),
  config: z
    .object({
      User: z.string().optional(),
      Entrypoint: z.array(z.string()).nullable().optional(),
      Cmd: z.array(z.string()).nullable().optional(),
      Env: z.array(z.string()).optional(),
      ExposedPorts: z.record(z.string(), z.object({})).optional(),
      Labels: z.record(z.string(), z.string()).nullable().optional(),
      WorkingDir: z.string().optional(),
    })
    .default({}),
  rootfs: z.object({ type: z.string(), diff_ids: z.array(z.string()) }),
});
export type ImageConfig = z.infer<typeof ImageConfig>;

export interface PlatformReport {
  platform: string;
  manifestDigest: string;
  compressedBytes: number;
  uncompressedBytes: number;
  layers: number;
  config: ImageConfig;
}

export interface ImageReport {
  image: string;
  tag: string;
  indexDigest: string;
  platforms: PlatformReport[];
}

/** An unpacked OCI archive; `close()` removes it. */
export class OciLayout {
  private constructor(readonly dir: string) {}

  static async open(archive: string): Promise<OciLayout> {
    const dir = mkdtempSync(join(tmpdir(), "oci-layout-"));
    const p = Bun.spawn(["tar", "-xf", archive, "-C", dir], { stdout: "ignore", stderr: "pipe" });
    const err = await new Response(p.stderr).text();
    if ((await p.exited) !== 0) throw new Error(`tar -xf ${archive}: ${err.trim()}`);
    return new OciLayout(dir);
  }

  blob(digest: string): Buffer {
    return readFileSync(join(this.dir, "blobs", ...digest.split(":")));
  }

  json<T>(schema: z.ZodType<T>, digest: string): T {
    return schema.parse(JSON.parse(this.blob(digest).toString("utf8")));
  }

  /** The image index the layout's index.json names with `tag` (or its only entry). */
  index(tag?: string): { digest: string; index: z.infer<typeof Index> } {
    const top = Index.parse(JSON.parse(readFileSync(join(this.dir, "index.json"), "utf8")));
    const entry = top.manifests.find((m) => tag === undefined || m.annotations?.["org.opencontainers.image.ref.name"] === tag) ?? (top.manifests.length === 1 ? top.manifests[0] : undefined);
    if (!entry) throw new Error(`no index tagged ${tag} in ${this.dir}/index.json`);
    if (!/index|manifest\.list/.test(entry.mediaType)) throw new Error(`index.json names a ${entry.mediaType}, not an image index`);
    return { digest: entry.digest, index: this.json(Index, entry.digest) };
  }

  manifest(digest: string): z.infer<typeof Manifest> {
    return this.json(Manifest, digest);
  }

  /** The uncompressed tar of a layer. */
  layerTar(layer: { digest: string; mediaType: string }): Buffer {
    const raw = this.blob(layer.digest);
    return layer.mediaType.endsWith("gzip") ? Buffer.from(Bun.gunzipSync(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength) as Uint8Array<ArrayBuffer>)) : raw;
  }

  close(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function readOciArchive(archive: string, image: string, tag: string): Promise<ImageReport> {
  const layout = await OciLayout.open(archive);
  try {
    const { digest, index } = layout.index(tag);
    const platforms = index.manifests.map((d) => {
      const m = layout.manifest(d.digest);
      const config = layout.json(ImageConfig, m.config.digest);
      return {
        platform: `${config.os}/${config.architecture}`,
        manifestDigest: d.digest,
        compressedBytes: m.layers.reduce((n, l) => n + l.size, 0) + m.config.size,
        uncompressedBytes: m.layers.reduce((n, l) => n + layout.layerTar(l).length, 0),
        layers: m.layers.length,
        config,
      };
    });
    return { image, tag, indexDigest: digest, platforms };
  } finally {
    layout.close();
  }
}
