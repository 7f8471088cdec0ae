// The key file's quota fields are looked up by name: a name an Object inherits (constructor, toString, __proto__)
// must be refused like any unknown field, as a StartupError naming the file and line, not crash the parser.
import { describe, expect, test } from "bun:test";
import { StartupError } from "#shared/config/index.ts";
import { parseKeyFile } from "#shared/e2b/keys.ts";

describe("key file field names", () => {
  for (const name of ["constructor", "toString", "__proto__", "hasOwnProperty", "valueOf"]) {
    test(`"${name}=1" is a startup error naming the file and line`, () => {
      let thrown: unknown;
      try {
        parseKeyFile(`k0 team\nk1 team ${name}=1\n`, "default", "/etc/keys");
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(StartupError);
      expect((thrown as Error).message).toContain(`malformed entry on line 2 of /etc/keys`);
      expect((thrown as Error).message).toContain(`got "${name}=1"`);
    });
  }

  test("the known fields still parse", () => {
    const f = parseKeyFile("k1 team max-sandboxes=2 creates-per-second=1.5\n", "default");
    expect(f.quotas.get("team")).toEqual({ maxSandboxes: 2, createsPerSecond: 1.5 });
  });

  test("the snapshot fields parse, and two lines may not give one namespace different snapshot quotas", () => {
    const f = parseKeyFile("k1 team max-snapshots=3 snapshots-per-second=0.5\nk2 team max-snapshots=3 snapshots-per-second=0.5\n", "default");
    expect(f.quotas.get("team")).toEqual({ maxSnapshots: 3, snapshotsPerSecond: 0.5 });
    expect(() => parseKeyFile("k1 team max-snapshots=3\nk2 team max-snapshots=4\n", "default", "/etc/keys")).toThrow(
      'namespace "team" has other quota values on line 1',
    );
    expect(() => parseKeyFile("k1 team max-snapshots=-1\n", "default", "/etc/keys")).toThrow("max-snapshots must be a whole number >= 0 on line 1 of /etc/keys");
  });
});
