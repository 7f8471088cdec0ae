// Staged shutdown: order (draining, grace, listeners, closers in reverse), bounds, exit codes, a second
// signal, and one real child process stopped by SIGTERM.
import { describe, expect, test } from "bun:test";
import { EventEmitter } from "node:events";
import { join } from "node:path";
import { Shutdown, type SignalSource } from "#shared/lifecycle/shutdown.ts";
import { createLogger } from "#shared/log/index.ts";

const quiet = createLogger({ level: "error", destination: { write: () => {} } });

function harness(options: { stepTimeoutMs?: number; totalTimeoutMs?: number; drainGraceMs?: number } = {}) {
  const signals = new EventEmitter();
  const events: string[] = [];
  const exits: number[] = [];
  let exited!: (code: number) => void;
  const exitedOnce = new Promise<number>((resolve) => {
    exited = resolve;
  });
  const shutdown = new Shutdown({
    logger: quiet,
    signals: signals as unknown as SignalSource,
    exit: (code) => {
      exits.push(code);
      exited(code);
    },
    clock: {
      sleep: async (ms) => {
        events.push(`grace ${ms}`);
      },
    },
    ...options,
  });
  return { signals, events, exits, shutdown, exitedOnce };
}

describe("staged shutdown", () => {
  test("runs draining hooks, the grace wait, listeners, then closers in reverse order, and exits 0", async () => {
    const { signals, events, shutdown, exitedOnce } = harness({ drainGraceMs: 500 });
    shutdown.onDraining("readyz", () => events.push(`draining (draining=${shutdown.draining})`));
    shutdown.addListener("http", async () => {
      await Bun.sleep(5);
      events.push("listener http");
    });
    shutdown.addListener("health", () => events.push("listener health"));
    shutdown.addCloser("informers", () => events.push("closer informers"));
    shutdown.addCloser("queues", () => events.push("closer queues"));
    shutdown.addCloser("publisher", () => events.push("closer publisher"));
    shutdown.install();
    signals.emit("SIGTERM");
    expect(await exitedOnce).toBe(0);
    expect(events).toEqual([
      "draining (draining=true)",
      "grace 500",
      "listener health",
      "listener http",
      "closer publisher",
      "closer queues",
      "closer informers",
    ]);
    expect(await shutdown.done).toBe(0);
  });

  test("SIGINT starts the same shutdown", async () => {
    const { signals, shutdown, exitedOnce } = harness();
    shutdown.install();
    signals.emit("SIGINT");
    expect(await exitedOnce).toBe(0);
  });

  test("a closer that hangs is cut off at its bound, the rest still run, and the exit code is 1", async () => {
    const { signals, events, shutdown, exitedOnce } = harness({ stepTimeoutMs: 50 });
    shutdown.addCloser("after", () => events.push("closer after-hang"));
    shutdown.addCloser("hangs", () => new Promise(() => {}));
    shutdown.install();
    const started = performance.now();
    signals.emit("SIGTERM");
    expect(await exitedOnce).toBe(1);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(events).toEqual(["closer after-hang"]);
  });

  test("a closer that throws makes the exit code 1 without stopping the others", async () => {
    const { signals, events, shutdown, exitedOnce } = harness();
    shutdown.addCloser("ok", () => events.push("closer ok"));
    shutdown.addCloser("throws", () => {
      throw new Error("close failed");
    });
    shutdown.addListener("rejects", () => Promise.reject(new Error("listener failed")));
    shutdown.install();
    signals.emit("SIGTERM");
    expect(await exitedOnce).toBe(1);
    expect(events).toEqual(["closer ok"]);
  });

  test("the whole drain is bounded: past the total timeout the exit code is 1", async () => {
    const { signals, shutdown, exitedOnce } = harness({ stepTimeoutMs: 10_000, totalTimeoutMs: 60 });
    shutdown.addCloser("slow", () => Bun.sleep(5_000));
    shutdown.install();
    const started = performance.now();
    signals.emit("SIGTERM");
    expect(await exitedOnce).toBe(1);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  test("a second signal during the drain exits 1 at once", async () => {
    const { signals, exits, shutdown } = harness();
    let release!: () => void;
    shutdown.addCloser("slow", () => new Promise<void>((resolve) => (release = resolve)));
    shutdown.install();
    signals.emit("SIGTERM");
    await Bun.sleep(5);
    signals.emit("SIGINT");
    expect(exits).toEqual([1]);
    release();
    await shutdown.done;
  });

  test("shutdown() runs the stages once however often it is called", async () => {
    const { events, shutdown } = harness();
    shutdown.addCloser("once", () => events.push("closer once"));
    const [a, b] = await Promise.all([shutdown.shutdown("test"), shutdown.shutdown("test again")]);
    expect([a, b]).toEqual([0, 0]);
    expect(events).toEqual(["closer once"]);
  });

  test("uninstall stops listening for signals", () => {
    const { signals, shutdown } = harness();
    shutdown.install();
    expect(signals.listenerCount("SIGTERM")).toBe(1);
    shutdown.uninstall();
    expect(signals.listenerCount("SIGTERM")).toBe(0);
    expect(signals.listenerCount("SIGINT")).toBe(0);
  });
});

describe("a real process", () => {
  test("drains on SIGTERM: unhealthy first, then the listener, then closers in reverse, exit 0", async () => {
    const child = Bun.spawn(["bun", join(import.meta.dir, "fixtures", "drain-child.ts")], {
      stdout: "pipe",
      stderr: "pipe",
    });
    const reader = child.stdout.getReader();
    const decoder = new TextDecoder();
    let out = "";
    while (!out.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      out += decoder.decode(value);
    }
    const port = Number(/ready (\d+)/.exec(out)?.[1]);
    expect(port).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(200);
    child.kill("SIGTERM");
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      out += decoder.decode(value);
    }
    expect(await child.exited).toBe(0);
    expect(out.trim().split("\n")).toEqual([
      `ready ${port}`,
      "draining",
      "listener closed",
      "closer last-started",
      "closer first-started",
    ]);
  }, 20_000);
});
