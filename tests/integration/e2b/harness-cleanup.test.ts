// A file whose setup fails leaves no listener behind (issue 27 item 4): the e2b test stack (simulated nodes, the test
// guest, the in-process sandbox-e2b) stops what it had started when a later step throws, and a beforeAll that gave up
// on a start still stops it once it is up (tests/support/started.ts). Measured on this process's own TCP listeners,
// the table another file's "every listener" attack reads.
import { describe, expect, test } from "bun:test";
import { tcpListenerInodes } from "#tests/integration/sandbox-apiserver/internal-listener.ts";
import { Started } from "#tests/support/started.ts";
import { waitFor } from "#tests/support/wait.ts";
import { startStack } from "./harness.ts";

describe("the e2b test stack on a failed setup", () => {
  test("a start that throws after the nodes and the guest listen leaves none of them listening", async () => {
    const before = tcpListenerInodes(process.pid);
    // An unknown flag fails after the simulated node and the guest are up, before sandbox-e2b starts.
    const err = await startStack({ extraFlags: ["--no-such-flag"] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    const left = [...tcpListenerInodes(process.pid)].filter((i) => !before.has(i));
    expect(left).toEqual([]);
  });

  test("a start the beforeAll stopped waiting for is stopped once it is up", async () => {
    const before = tcpListenerInodes(process.pid);
    const started = new Started();
    // As a timed-out beforeAll leaves it: tracked, never awaited by the hook.
    void started.track(startStack());
    await started.stopAll();
    await waitFor("the listeners to close", () => [...tcpListenerInodes(process.pid)].every((i) => before.has(i)), 10_000);
  });
});
