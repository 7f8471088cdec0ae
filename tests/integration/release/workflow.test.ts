// The release workflow (.github/workflows/release.yml) ships what the suite tests: it must lint clean under
// actionlint (built from the Go module proxy, tests/kube/actionlint.ts), run on a version tag, build and push
// every image in images/ for both architectures with the command the image tests run (`bash scripts/images.sh`),
// as the version and latest, and attach the four daemons' binaries for both architectures.
import { beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { actionlintBinary } from "#tests/kube/actionlint.ts";
import { run } from "#tests/support/run.ts";

const root = join(import.meta.dir, "..", "..", "..");
const file = join(root, ".github", "workflows", "release.yml");
const DAEMONS = ["vk-sandbox", "sandbox-apiserver", "sandbox-envd-proxy", "sandbox-e2b"];
const IMAGES = readdirSync(join(root, "images"), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();

interface Step {
  name?: string;
  uses?: string;
  run?: string;
}
interface Workflow {
  on: { push: { tags: string[] } };
  permissions: Record<string, string>;
  jobs: Record<string, { steps: Step[]; container?: { image: string } }>;
}

let wf: Workflow;
let steps: Step[];
beforeAll(() => {
  wf = parse(readFileSync(file, "utf8")) as Workflow;
  steps = Object.values(wf.jobs).flatMap((j) => j.steps);
});

/** The one step whose script runs `bash scripts/images.sh`, with its continuation lines joined. */
function imagesCommand(): string {
  const s = steps.filter((x) => x.run?.includes("scripts/images.sh"));
  expect(s).toHaveLength(1);
  return s[0]!.run!.replace(/\\\n\s*/g, " ");
}

describe("release workflow", () => {
  test("actionlint finds nothing", async () => {
    const bin = await actionlintBinary();
    const r = await run([bin, "-no-color", file], { cwd: root, timeoutMs: 120_000 });
    expect(`${r.code}\n${r.stdout}${r.stderr}`).toBe("0\n");
  }, 900_000);

  test("runs on v* tags with write access to the release and packages only", () => {
    expect(wf.on.push.tags).toEqual(["v*"]);
    expect(wf.permissions).toEqual({ contents: "write", packages: "write" });
    // Debian 12, like the machines the tests run on: the same buildah and the same apt sources for the base.
    expect(Object.values(wf.jobs)[0]!.container?.image).toBe("debian:bookworm");
  });

  test("builds and pushes every image in images/, both architectures, as the version and latest, with the tested command", () => {
    const cmd = imagesCommand();
    expect(cmd).toMatch(/(^|\s)bash scripts\/images\.sh /);
    const flag = (name: string) => [...cmd.matchAll(new RegExp(`--${name}\\s+("[^"]*"|\\S+)`, "g"))].map((m) => m[1]!.replace(/^"|"$/g, ""));
    expect(flag("arch")).toEqual(["amd64,arm64"]);
    expect(flag("image")[0]!.split(",").sort()).toEqual(IMAGES);
    expect(flag("push")).toHaveLength(1);
    expect(flag("push")[0]).toContain("registry");
    expect(flag("push-tag")).toEqual(["latest"]);
    expect(flag("tag")).toEqual(["$BUILD_VERSION"]);
    // The registry is ghcr.io/<owner>, lower-cased (GHCR refuses upper case).
    const version = steps.find((s) => s.run?.includes("GITHUB_OUTPUT"))!.run!;
    expect(version).toContain('echo "registry=ghcr.io/$owner"');
    expect(version).toContain("tr '[:upper:]' '[:lower:]'");
  });

  test("attaches every daemon's binary for amd64 and arm64, with checksums", () => {
    const build = steps.find((s) => s.run?.includes("scripts/build.ts --arch"))!.run!;
    expect(build).toContain("for arch in amd64 arm64");
    for (const d of DAEMONS) expect(build).toContain(d);
    expect(build).toContain("SHA256SUMS");
    const upload = steps.find((s) => s.run?.includes("gh release"))!.run!;
    expect(upload).toContain("release/*");
  });
});
