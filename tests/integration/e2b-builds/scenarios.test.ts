// The build API's scenarios (docs/e2b.md §9, 47-51) and its failure paths against sandbox-e2b and simulated nodes
// with their envd-compatible guests: after each build that ends, the nodes hold no build sandbox.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { KEY_A, KEY_B, api, allLogs, buildClaims, requestBuild, startBuildStack, startReplica, tarOf, waitBuild, type BuildStack } from "./support.ts";
import { waitFor } from "#tests/support/wait.ts";

const HASH = "c".repeat(64);

describe("two nodes, parallel 4, directory store of 64 KiB", () => {
  let s: BuildStack;
  beforeAll(async () => {
    // parallel 4: a namespace's share is 2, so two builds of one name can race.
    s = await startBuildStack({ nodes: 2, parallel: 4, uploadMax: 64 * 1024, extra: ["--e2b-build-log-lines=2000"] });
  }, 60_000);
  afterAll(() => s.stop());

  test("scenario 49: a RUN exiting 3 ends the build in error at its 1-based step, logs drained, no claim left", async () => {
    const b = await requestBuild(s, "fails");
    const start = await api(s, "POST", `/v2/templates/${b.templateID}/builds/${b.buildID}`, {
      fromImage: "base",
      steps: [
        { type: "RUN", args: ["echo first step"] },
        { type: "RUN", args: ["echo about to fail; exit 3"] },
        { type: "RUN", args: ["echo never"] },
      ],
    });
    expect(start.status).toBe(202);
    const st = await waitBuild(s, b);
    expect(st.status).toBe("error");
    expect(st.reason.step).toBe("2");
    expect(st.reason.message).toContain("exit code 3");
    expect(st.reason.logEntries).toHaveLength(1);
    const logs = await allLogs(s, b);
    expect(logs.find((l) => l.message === "first step")?.step).toBe("1");
    expect(logs.find((l) => l.message === "about to fail")?.step).toBe("2");
    expect(logs.some((l) => l.message === "never")).toBe(false);
    // The SDK drains until an empty page.
    const tail = await api(s, "GET", `/templates/${b.templateID}/builds/${b.buildID}/status?logsOffset=${logs.length}`);
    expect(tail.json.logEntries).toEqual([]);
    // Paging and level filter.
    const page = await api(s, "GET", `/templates/${b.templateID}/builds/${b.buildID}/status?logsOffset=1&limit=1`);
    expect(page.json.logEntries).toEqual([logs[1]!]);
    const errs = await api(s, "GET", `/templates/${b.templateID}/builds/${b.buildID}/status?level=error`);
    expect(errs.json.logEntries.every((l: { level: string }) => l.level === "error")).toBe(true);
    expect((await api(s, "GET", `/templates/${b.templateID}/builds/${b.buildID}/status?logsOffset=-1`)).status).toBe(400);
    expect((await api(s, "GET", `/templates/${b.templateID}/builds/${b.buildID}/status?level=loud`)).status).toBe(400);
    await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  }, 90_000);

  test("a RUN flooding output: the log keeps --e2b-build-log-lines lines, a 200 KiB line arrives in 64 KiB parts, the outcome is the last line", async () => {
    const b = await requestBuild(s, "flood");
    const start = await api(s, "POST", `/v2/templates/flood/builds/${b.buildID}`, {
      fromImage: "base",
      steps: [{ type: "RUN", args: ["head -c 204800 /dev/zero | tr '\\0' x; echo; seq 1 3000"] }],
    });
    expect(start.status).toBe(202);
    const st = await waitBuild(s, b);
    expect(st.status).toBe("ready");
    const logs = await allLogs(s, b);
    // 2000 lines kept (--e2b-build-log-lines), then the drop note and the outcome.
    expect(logs).toHaveLength(2002);
    // A poll without a limit gets one bounded page (1000 entries at most), not the whole log.
    const first = await api(s, "GET", `/templates/flood/builds/${b.buildID}/status`);
    expect(first.json.logEntries.length).toBeGreaterThan(0);
    expect(first.json.logEntries.length).toBeLessThanOrEqual(1000);
    expect(first.text.length).toBeLessThan(1.2 * 1024 * 1024);
    expect(logs.slice(-2).map((l) => l.message)).toEqual(["log limit reached: later output lines are dropped", "template flood ready"]);
    const long = logs.filter((l) => /^x+$/.test(l.message)).map((l) => l.message.length);
    expect(long).toEqual([65536, 65536, 65536, 8192]);
    await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  }, 60_000);

  test("scenario 48 and tenancy: another replica, or another namespace, does not know the build (404)", async () => {
    const b = await requestBuild(s, "elsewhere");
    const other = await startReplica(s, [`--e2b-build-dir=${s.uploads}`]);
    try {
      const r = await fetch(`${other.apiUrl}/templates/${b.templateID}/builds/${b.buildID}/status`, { headers: { "x-api-key": "e2b_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" } });
      expect(r.status).toBe(404);
      expect(await r.json()).toEqual({ code: 404, message: "build not found on this replica" });
    } finally {
      await other.stop();
    }
    const foreign = await api(s, "GET", `/templates/${b.templateID}/builds/${b.buildID}/status`, undefined, KEY_B);
    expect(foreign.status).toBe(404);
    const start = await api(s, "POST", `/v2/templates/${b.templateID}/builds/${b.buildID}`, { fromImage: "base", steps: [] }, KEY_B);
    expect(start.status).toBe(404);
  }, 60_000);

  test("scenario 50: the signed PUT refuses expired or altered links (401) and bodies over the bound (413); a valid one stores and then reads present", async () => {
    const link = await api(s, "GET", `/templates/app/files/${HASH}`);
    expect(link.status).toBe(201);
    expect(link.json.present).toBe(false);
    const url = new URL(link.json.url);
    expect(url.origin).toBe(s.apiUrl);
    const put = (u: URL, body: Uint8Array) => fetch(u, { method: "PUT", body: body as Uint8Array<ArrayBuffer>, headers: { "content-length": String(body.byteLength) } });
    const altered = new URL(url);
    altered.searchParams.set("sig", "0".repeat(64));
    expect((await put(altered, new Uint8Array(10))).status).toBe(401);
    const expired = new URL(url);
    expired.searchParams.set("expires", String(Math.floor(Date.now() / 1000) - 10));
    expect((await put(expired, new Uint8Array(10))).status).toBe(401);
    const otherNs = new URL(url);
    otherNs.searchParams.set("ns", "team-b");
    expect((await put(otherNs, new Uint8Array(10))).status).toBe(401);
    const big = await put(url, new Uint8Array(64 * 1024 + 1));
    expect(big.status).toBe(413);
    // Streamed without a declared length and over the bound: refused too.
    let sent = 0;
    const endless = new ReadableStream<Uint8Array>({ pull: (c) => void (sent += 16384, c.enqueue(new Uint8Array(16384))) });
    const chunked = await fetch(url, { method: "PUT", body: endless, duplex: "half" } as RequestInit).catch((e: Error) => e);
    if (!(chunked instanceof Error)) expect(chunked.status).toBe(413);
    expect((await api(s, "GET", `/templates/app/files/${HASH}`)).json.present).toBe(false);
    const ok = await put(url, tarOf({ "a.txt": "a" }));
    expect(ok.status).toBe(200);
    expect((await api(s, "GET", `/templates/app/files/${HASH}`)).json).toEqual({ present: true });
    // Another namespace's view of the same name and hash: not present.
    expect((await api(s, "GET", `/templates/app/files/${HASH}`, undefined, KEY_B)).json.present).toBe(false);
    expect((await api(s, "GET", `/templates/app/files/nothex`)).status).toBe(400);
    expect((await api(s, "GET", `/templates/.hidden/files/${HASH}`)).status).toBe(400);
  }, 60_000);

  test("a COPY whose hash was never uploaded fails at its step and releases the sandbox", async () => {
    const b = await requestBuild(s, "nofiles");
    const start = await api(s, "POST", `/v2/templates/${b.templateID}/builds/${b.buildID}`, {
      fromImage: "base",
      steps: [{ type: "RUN", args: ["true"] }, { type: "COPY", args: ["data/", "/app/"], filesHash: "d".repeat(64) }],
    });
    expect(start.status).toBe(202);
    const st = await waitBuild(s, b);
    expect(st.status).toBe("error");
    expect(st.reason.step).toBe("2");
    expect(st.reason.message).toContain("no uploaded files");
    await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  }, 60_000);

  test("bad starts answer 400 before anything is claimed; an unknown build 404; a second start of a started build 202", async () => {
    const b = await requestBuild(s, "badstart");
    const path = `/v2/templates/${b.templateID}/builds/${b.buildID}`;
    expect((await api(s, "POST", path, { fromImage: "base", steps: [{ type: "RUN", args: [] }] })).json.message).toBe("step 1 (RUN): needs a command");
    expect((await api(s, "POST", path, { fromTemplate: "x" })).status).toBe(400);
    expect((await api(s, "POST", path, { fromImage: "base", steps: [{ type: "HEALTHCHECK", args: ["x"] }] })).status).toBe(400);
    expect((await api(s, "POST", path)).status).toBe(400);
    expect((await api(s, "POST", `/v2/templates/${b.templateID}/builds/00000000-0000-4000-8000-000000000000`, { fromImage: "base" })).status).toBe(404);
    expect((await api(s, "GET", `/templates/${b.templateID}/builds/${b.buildID}/status`)).json.status).toBe("waiting");
    expect(buildClaims(s)).toBe(0);
    expect((await api(s, "POST", path, { fromImage: "base", steps: [] })).status).toBe(202);
    expect((await api(s, "POST", path, { fromImage: "base", steps: [] })).status).toBe(202);
    expect((await waitBuild(s, b)).status).toBe("ready");
    expect((await api(s, "POST", "/v3/templates", {})).json).toEqual({ code: 400, message: "name is required" });
  }, 60_000);

  test("ENV expands with Docker's rules and runs nothing; root helpers ignore the tenant's PATH; ${P@P} fails its step", async () => {
    const b = await requestBuild(s, "envs");
    const start = await api(s, "POST", `/v2/templates/envs/builds/${b.buildID}`, {
      fromImage: "base",
      steps: [
        { type: "ENV", args: ["A", "hello", "B", "${A}-$A-${U:-dflt}-$(id)-`id`-\\$A", "H", "$HOME"] },
        { type: "RUN", args: ['echo "B=$B"; echo "H=$H"'] },
        // A tenant PATH with no mkdir in it: the root helper of WORKDIR runs with its own fixed environment.
        { type: "ENV", args: ["PATH", "/nowhere"] },
        { type: "WORKDIR", args: ["wd"] },
        { type: "ENV", args: ["P", "$(id)", "Q", "${P@P}"] },
      ],
    });
    expect(start.status).toBe(202);
    const st = await waitBuild(s, b);
    const logs = await allLogs(s, b);
    expect(logs.find((l) => l.message.startsWith("B="))?.message).toBe("B=hello-hello-dflt-$(id)-`id`-$A");
    expect(logs.find((l) => l.message.startsWith("H="))?.message).toMatch(/^H=\/.+/);
    expect(logs.some((l) => l.step === "4" && l.message.startsWith("WORKDIR "))).toBe(true);
    expect(st.status).toBe("error");
    expect(st.reason.step).toBe("5");
    expect(st.reason.message).toContain("unsupported substitution ${P@P}");
    await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  }, 60_000);

  test("issue 17: one namespace holds at most ceil(parallel / 2) slots (429 naming its limit); another namespace still starts", async () => {
    const mine = await Promise.all(["hog-1", "hog-2", "hog-3"].map((n) => requestBuild(s, n)));
    const slow = { fromImage: "base", steps: [{ type: "RUN", args: ["sleep 3"] }] };
    for (const b of mine.slice(0, 2)) expect((await api(s, "POST", `/v2/templates/${b.templateID}/builds/${b.buildID}`, slow)).status).toBe(202);
    const third = await api(s, "POST", `/v2/templates/hog-3/builds/${mine[2]!.buildID}`, slow);
    expect(third.status).toBe(429);
    expect(third.json.message).toBe("namespace team-a already runs 2 builds, its limit (half of --e2b-build-parallel=4, rounded up); retry the start");
    expect((await api(s, "GET", `/templates/hog-3/builds/${mine[2]!.buildID}/status`)).json.status).toBe("waiting");
    const other = await api(s, "POST", "/v3/templates", { name: "neighbour" }, KEY_B);
    expect(other.status).toBe(202);
    expect((await api(s, "POST", `/v2/templates/neighbour/builds/${other.json.buildID}`, { fromImage: "base", steps: [] }, KEY_B)).status).toBe(202);
    for (const b of mine.slice(0, 2)) expect((await waitBuild(s, b)).status).toBe("ready");
    await waitFor("the build sandboxes released", () => buildClaims(s) === 0, 10_000);
  }, 90_000);

  test("two builds of the same name racing: both finish, one holder of the name is left on the fleet, no claim left", async () => {
    const a = await requestBuild(s, "race");
    const b = await requestBuild(s, "race");
    const body = (marker: string) => ({ fromImage: "base", steps: [{ type: "RUN", args: [`echo ${marker} > /home/user/which`] }] });
    const [ra, rb] = await Promise.all([
      api(s, "POST", `/v2/templates/race/builds/${a.buildID}`, body("a")),
      api(s, "POST", `/v2/templates/race/builds/${b.buildID}`, body("b")),
    ]);
    expect([ra.status, rb.status]).toEqual([202, 202]);
    const [sa, sb] = await Promise.all([waitBuild(s, a), waitBuild(s, b)]);
    expect([sa.status, sb.status]).toEqual(["ready", "ready"]);
    const holders = s.cluster.nodes.flatMap((n) => (n.info().templates ?? []).filter((t: { key: { template: string } }) => t.key.template === "e2b/team-a/race"));
    expect(holders).toHaveLength(1);
    await waitFor("the build sandboxes released", () => buildClaims(s) === 0, 10_000);
  }, 90_000);
});

describe("parallel 1, a 6 s build timeout", () => {
  let s: BuildStack;
  beforeAll(async () => {
    s = await startBuildStack({ parallel: 1, timeout: "6s" });
  }, 60_000);
  afterAll(() => s.stop());

  test("scenario 47: a second start while one runs answers 429 and stays waiting; a later start is taken", async () => {
    // A slow release of the build sandbox: "ready" must still mean the slot is free (the status waits for it).
    for (const n of s.cluster.nodes) n.latency("release", 1_500);
    const a = await requestBuild(s, "first");
    const b = await requestBuild(s, "second");
    expect((await api(s, "POST", `/v2/templates/first/builds/${a.buildID}`, { fromImage: "base", steps: [{ type: "RUN", args: ["sleep 2"] }] })).status).toBe(202);
    const busy = await api(s, "POST", `/v2/templates/second/builds/${b.buildID}`, { fromImage: "base", steps: [] });
    expect(busy.status).toBe(429);
    expect(busy.json).toEqual({ code: 429, message: "every build slot is busy; retry the start" });
    expect((await api(s, "GET", `/templates/second/builds/${b.buildID}/status`)).json.status).toBe("waiting");
    expect((await waitBuild(s, a)).status).toBe("ready");
    expect((await api(s, "POST", `/v2/templates/second/builds/${b.buildID}`, { fromImage: "base", steps: [] })).status).toBe(202);
    expect((await waitBuild(s, b)).status).toBe("ready");
    await waitFor("the build sandboxes released", () => buildClaims(s) === 0, 10_000);
    for (const n of s.cluster.nodes) n.latency("release", null);
  }, 60_000);

  test("a build over its timeout ends in error at the running step and releases its sandbox; its lease is the timeout", async () => {
    const b = await requestBuild(s, "slow");
    expect((await api(s, "POST", `/v2/templates/slow/builds/${b.buildID}`, { fromImage: "base", steps: [{ type: "RUN", args: ["true"] }, { type: "RUN", args: ["sleep 60"] }] })).status).toBe(202);
    // The build sandbox's lease is the build timeout: a replica that dies mid-build leaks it no longer than that.
    const claim = await waitFor("the build sandbox claimed", () => s.cluster.nodes.flatMap((n) => n.claims()).find((c) => (c.claimRef ?? "").includes("/e2b-build-")), 10_000);
    expect(claim.claimRef).toMatch(/^team-a\/e2b-build-[0-9a-f]{10}$/);
    expect(claim.grantedTtlSeconds).toBe(6);
    const st = await waitBuild(s, b, 30_000);
    expect(st.status).toBe("error");
    expect(st.reason.step).toBe("2");
    expect(st.reason.message).toBe("build timed out after 6 s");
    await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  }, 60_000);

  test("a build whose claim fails (no such image) ends in error at step base", async () => {
    const b = await requestBuild(s, "noimage");
    expect((await api(s, "POST", `/v2/templates/noimage/builds/${b.buildID}`, { fromImage: "unknown:image", steps: [] })).status).toBe(202);
    const st = await waitBuild(s, b);
    expect(st.status).toBe("error");
    expect(st.reason.step).toBe("base");
    expect(buildClaims(s)).toBe(0);
  }, 30_000);
});

describe("max-sandboxes=1 for team-a (build sandboxes count toward it)", () => {
  let s: BuildStack;
  beforeAll(async () => {
    s = await startBuildStack({ parallel: 4, keys: `${KEY_A} team-a max-sandboxes=1\n${KEY_B} team-b\n` });
  }, 60_000);
  afterAll(() => s.stop());

  test("a second build while one runs is refused by the namespace quota (429), like a create; after it, a build starts", async () => {
    const a = await requestBuild(s, "q1");
    const b = await requestBuild(s, "q2");
    expect((await api(s, "POST", `/v2/templates/q1/builds/${a.buildID}`, { fromImage: "base", steps: [{ type: "RUN", args: ["sleep 2"] }] })).status).toBe(202);
    const over = await api(s, "POST", `/v2/templates/q2/builds/${b.buildID}`, { fromImage: "base", steps: [] });
    expect(over.status).toBe(429);
    expect(over.json.message).toMatch(/^namespace quota exceeded: 1 of 1 sandboxes held, 1 more asked \(max-sandboxes\)/);
    expect((await api(s, "GET", `/templates/q2/builds/${b.buildID}/status`)).json.status).toBe("waiting");
    expect((await waitBuild(s, a)).status).toBe("ready");
    await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
    const again = await waitFor("the quota freed", async () => {
      const r = await api(s, "POST", `/v2/templates/q2/builds/${b.buildID}`, { fromImage: "base", steps: [] });
      return r.status === 202 ? r : undefined;
    }, 10_000, 200);
    expect(again.status).toBe(202);
    expect((await waitBuild(s, b)).status).toBe("ready");
  }, 60_000);
});

describe("a replica stopped mid-build", () => {
  let s: BuildStack;
  beforeAll(async () => {
    s = await startBuildStack({ store: false });
  }, 60_000);
  afterAll(() => s.stop());

  test("stopping the replica that runs a build releases the build's sandbox", async () => {
    const other = await startReplica(s);
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${other.apiUrl}${path}`, { method, headers: { "x-api-key": KEY_A, "content-type": "application/json" }, ...(body ? { body: JSON.stringify(body) } : {}) });
    const b = (await (await call("POST", "/v3/templates", { name: "stopped" })).json()) as { buildID: string };
    expect((await call("POST", `/v2/templates/stopped/builds/${b.buildID}`, { fromImage: "base", steps: [{ type: "RUN", args: ["sleep 60"] }] })).status).toBe(202);
    await waitFor("the build sandbox claimed", () => buildClaims(s) === 1, 10_000);
    await waitFor("the build's RUN step running", async () => {
      const st = (await (await call("GET", `/templates/stopped/builds/${b.buildID}/status`)).json()) as { logEntries: { step: string }[] };
      return st.logEntries.some((l) => l.step === "base");
    }, 10_000);
    await other.stop();
    await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  }, 60_000);
});

describe("builds on, no upload store", () => {
  let s: BuildStack;
  beforeAll(async () => {
    s = await startBuildStack({ store: false });
  }, 60_000);
  afterAll(() => s.stop());

  test("scenario 51: a COPY step is refused at start (400); the files route is absent", async () => {
    const b = await requestBuild(s, "copy");
    const r = await api(s, "POST", `/v2/templates/copy/builds/${b.buildID}`, { fromImage: "base", steps: [{ type: "COPY", args: ["a", "/b"], filesHash: HASH }] });
    expect(r.status).toBe(400);
    expect(r.json.message).toContain("no upload store");
    expect((await api(s, "GET", `/templates/copy/files/${HASH}`)).status).toBe(404);
  }, 30_000);
});
