// The build step cache (docs/e2b.md "Builds", beyond the seeds): a rebuild with unchanged steps runs none of them,
// a change at step k reruns from step k, each name keeps one chain of cache entries, and the catalog lists none.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { allLogs, api, buildClaims, requestBuild, sdkOpts, startBuildStack, waitBuild, type BuildStack } from "./support.ts";
import { waitFor } from "#tests/support/wait.ts";

let s: BuildStack;
beforeAll(async () => {
  s = await startBuildStack({ proxy: true });
}, 60_000);
afterAll(() => s.stop());

const steps = (third: string) => [
  { type: "RUN", args: ["echo one > /home/user/one; sleep 1"] },
  { type: "ENV", args: ["STAGE", "two"] },
  { type: "RUN", args: ["echo $STAGE > /home/user/two; sleep 1"] },
  { type: "RUN", args: [`echo ${third} > /home/user/three; sleep 1`] },
];
const cacheEntries = () =>
  s.cluster.nodes.flatMap((n) => (n.info().templates ?? []).filter((t: { key: { template: string } }) => t.key.template.startsWith("e2b/team-a/_c-"))).length;

async function build(third: string, force = false): Promise<{ ms: number; logs: { message: string; step: string }[] }> {
  const b = await requestBuild(s, "cached");
  const t0 = performance.now();
  expect((await api(s, "POST", `/v2/templates/cached/builds/${b.buildID}`, { fromImage: "base", steps: steps(third), force })).status).toBe(202);
  const st = await waitBuild(s, b);
  const ms = performance.now() - t0;
  expect(st.status).toBe("ready");
  await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  return { ms, logs: await allLogs(s, b) };
}

/** The fleet view lists what the last build promoted one poll later. */
const settle = (n: number) => waitFor(`${n} cache entries in the fleet view`, () => s.mesh.fleet.nodes().flatMap((n) => n.templates).filter((t) => t.template.startsWith("e2b/team-a/_c-")).length === n, 10_000);

test("unchanged steps are not run again; a change at step 4 reruns from step 4; one chain per name", async () => {
  const first = await build("three");
  expect(first.logs.filter((l) => l.message === "cached" || l.message.includes("cached:")).map((l) => l.message)).toEqual([]);
  expect(cacheEntries()).toBe(4);
  await settle(4);

  const again = await build("three");
  expect(again.logs.some((l) => l.message.startsWith("steps 1-4 cached"))).toBe(true);
  expect(again.logs.filter((l) => l.message === "cached").map((l) => l.step)).toEqual(["1", "2", "3", "4"]);

  const changed = await build("THREE");
  expect(changed.logs.some((l) => l.message.startsWith("steps 1-3 cached"))).toBe(true);
  expect(changed.logs.filter((l) => l.message === "cached").map((l) => l.step)).toEqual(["1", "2", "3"]);
  // The old step-4 entry left with the chain it belonged to.
  await waitFor("the old entry pruned", () => cacheEntries() === 4, 10_000);
  // skipCache (force): every step runs again.
  await settle(4);
  const forced = await build("THREE", true);
  expect(forced.logs.filter((l) => l.message === "cached")).toEqual([]);
  console.log(`build cache: first build ${first.ms.toFixed(0)} ms, unchanged rebuild ${again.ms.toFixed(0)} ms, step-4 change ${changed.ms.toFixed(0)} ms`);
  expect(again.ms).toBeLessThan(first.ms);

  // The template is the last build's; the catalog lists it and no cache entry.
  const listed = (await api(s, "GET", "/templates")).json.map((t: { templateID: string }) => t.templateID);
  expect(listed).toContain("cached");
  expect(listed.some((id: string) => id.startsWith("_c-"))).toBe(false);
  const sbx = await waitFor("a create from the template", () => Sandbox.create("cached", sdkOpts(s)).catch(() => undefined), 15_000, 250);
  try {
    expect((await sbx.commands.run("cat /home/user/one /home/user/two /home/user/three")).stdout).toBe("one\ntwo\nTHREE\n");
  } finally {
    await sbx.kill();
  }
}, 120_000);

test("a 20-step build caches its first 16 steps and its last (the cache is bounded per chain)", async () => {
  const before = cacheEntries();
  const b = await requestBuild(s, "long");
  const many = Array.from({ length: 20 }, (_, i) => ({ type: "RUN", args: [`echo ${i} >> /home/user/steps`] }));
  expect((await api(s, "POST", `/v2/templates/long/builds/${b.buildID}`, { fromImage: "base", steps: many })).status).toBe(202);
  expect((await waitBuild(s, b)).status).toBe("ready");
  await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  expect(cacheEntries() - before).toBe(17);
}, 60_000);
