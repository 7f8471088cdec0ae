// The startup line that says which guest sandboxes run (issue 18 item 6): the fallback names itself and its reason.
import { describe, expect, test } from "bun:test";
import { isolationLine } from "#services/sandboxd-sim/guest/index.ts";

describe("isolationLine", () => {
  test("the namespaced mode says what it is and is not", () => {
    const line = isolationLine({ mode: "namespaces" });
    expect(line).toContain("own Linux namespaces");
    expect(line).toContain("not VMs, not a security boundary");
    // Issue 27: root inside is contained, and the stack's startup line says how far.
    expect(line).toContain("root inside is the host's uid 0 with a bounded capability set (no chroot, mount or mknod: commands and build steps stay inside their root)");
  });
  test("the fallback is called a fallback and names why", () => {
    const line = isolationLine({ mode: "process", reason: "not running as root" });
    expect(line).toStartWith("guest sandboxes: FALLBACK to process sandboxes (not running as root)");
    expect(line).toContain("host's files and network");
  });
});
