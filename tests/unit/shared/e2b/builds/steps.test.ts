// Step validation of a build start (docs/e2b.md §6.1): the first invalid step is a 400 naming its 1-based index.
import { describe, expect, test } from "bun:test";
import { E2bError } from "#shared/e2b/errors.ts";
import { nameOf, planOf, sizeOf, StartBuildBody } from "#shared/e2b/builds/steps.ts";

const HASH = "a".repeat(64);
const start = (b: unknown) => StartBuildBody.parse(b);
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(E2bError);
    expect((err as E2bError).status).toBe(400);
    return (err as E2bError).message;
  }
  throw new Error("expected a 400");
}

describe("planOf", () => {
  test("the SDK's steps become the executor's", () => {
    const plan = planOf(
      start({
        fromImage: "base",
        steps: [
          { type: "RUN", args: ["echo built > /opt/marker", "root"] },
          { type: "ENV", args: ["A", "1", "B", "$HOME/x"] },
          { type: "WORKDIR", args: ["/app"] },
          { type: "USER", args: ["app"] },
          { type: "COPY", args: ["data/", "/app/data/", "", ""], filesHash: HASH },
        ],
        startCmd: "sleep 1000",
        readyCmd: "true",
        force: false,
      }),
      true,
    );
    expect(plan.steps).toEqual([
      { type: "RUN", cmd: "echo built > /opt/marker", user: "root" },
      { type: "ENV", env: [["A", "1"], ["B", "$HOME/x"]] },
      { type: "WORKDIR", dir: "/app" },
      { type: "USER", user: "app" },
      { type: "COPY", src: "data/", dest: "/app/data/", hash: HASH },
    ]);
    expect(plan.startCmd).toBe("sleep 1000");
    expect(plan.cacheUpTo).toBe(5);
  });

  test("skipCache: force on the build caches nothing, force on a step caches only the steps before it", () => {
    const steps = [{ type: "RUN", args: ["a"] }, { type: "RUN", args: ["b"], force: true }, { type: "RUN", args: ["c"], force: true }];
    expect(planOf(start({ fromImage: "img", steps, force: false }), true).cacheUpTo).toBe(1);
    expect(planOf(start({ fromImage: "img", steps, force: true }), true).cacheUpTo).toBe(0);
  });

  test("source rules: fromTemplate, a registry, no image, an internal name", () => {
    expect(refusal(() => planOf(start({ fromTemplate: "x", steps: [] }), true))).toContain("fromTemplate");
    expect(refusal(() => planOf(start({ fromImage: "img", fromImageRegistry: { type: "registry" } }), true))).toContain("fromImageRegistry");
    expect(refusal(() => planOf(start({ steps: [] }), true))).toBe("fromImage is required");
    expect(refusal(() => planOf(start({ fromImage: "e2b/ns/app" }), true))).toContain("not addressable");
  });

  test("the first invalid step is named by its 1-based index", () => {
    const steps = (bad: unknown) => start({ fromImage: "img", steps: [{ type: "RUN", args: ["true"] }, bad] });
    expect(refusal(() => planOf(steps({ type: "RUN", args: [] }), true))).toBe("step 2 (RUN): needs a command");
    expect(refusal(() => planOf(steps({ type: "WORKDIR", args: [""] }), true))).toContain("step 2 (WORKDIR)");
    expect(refusal(() => planOf(steps({ type: "USER", args: [] }), true))).toContain("step 2 (USER)");
    expect(refusal(() => planOf(steps({ type: "USER", args: ["bad user; rm"] }), true))).toContain("invalid user");
    expect(refusal(() => planOf(steps({ type: "ENV", args: ["A"] }), true))).toContain("key/value pairs");
    expect(refusal(() => planOf(steps({ type: "ENV", args: ["1A", "x"] }), true))).toContain("invalid variable name");
    expect(refusal(() => planOf(steps({ type: "COPY", args: ["a", "/b"], filesHash: "xyz" }), true))).toContain("filesHash");
    expect(refusal(() => planOf(steps({ type: "COPY", args: ["../etc", "/b"], filesHash: HASH }), true))).toContain("relative path");
    expect(refusal(() => planOf(steps({ type: "COPY", args: ["a", "/b", "", "999"], filesHash: HASH }), true))).toContain("invalid mode");
    expect(refusal(() => planOf(steps({ type: "ARG", args: ["x"] }), true))).toBe("step 2 (ARG): unsupported step type");
  });

  test("scenario 51: COPY without an upload store is refused at start", () => {
    expect(refusal(() => planOf(start({ fromImage: "img", steps: [{ type: "COPY", args: ["a", "/b"], filesHash: HASH }] }), false))).toContain("no upload store");
  });
});

describe("nameOf / sizeOf", () => {
  test("name ?? alias, a :tag suffix joins the tags", () => {
    expect(nameOf({ name: "app:v1", tags: ["x"] }, "ns")).toEqual({ name: "app", tags: ["v1", "x"] });
    expect(nameOf({ alias: "app" }, "ns")).toEqual({ name: "app", tags: [] });
    expect(refusal(() => nameOf({}, "ns"))).toBe("name is required");
    expect(refusal(() => nameOf({ name: "a".repeat(60) }, "ns"))).toContain("at most 56 characters");
    expect(refusal(() => nameOf({ name: "a/b" }, "ns"))).toContain("letters, digits");
  });

  test("size from cpu and memory, undefined when neither is given", () => {
    expect(sizeOf({})).toBeUndefined();
    expect(sizeOf({ cpuCount: 1, memoryMB: 1024 })).toBe("small");
    expect(sizeOf({ cpuCount: 2 })).toBe("medium");
    expect(sizeOf({ memoryMB: 4096 })).toBe("medium");
    expect(sizeOf({ cpuCount: 8 })).toBe("large");
  });
});
