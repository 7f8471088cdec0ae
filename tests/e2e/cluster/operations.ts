// Issue 26 item 4: operations on the chart's real Pods while clients are connected. A client loop runs for the
// whole block: stock e2b SDK create -> command -> kill cycles through the e2b and envd-proxy Services, and
// `kubectl get sandboxes -A` through the aggregator. Then, one after another: the warm-pool leader's Pod deleted
// (the other replica takes the Lease, and the pool's status keeps moving), `helm upgrade` to an image with another
// tag (a rolling update under the PDB), `helm rollback`, and each apiserver replica evicted in turn through the
// Eviction API (the PDB refuses the second eviction until the first's replacement is Ready). Each step reports the
// calls made, the failures and the longest gap a client saw; the goal, asserted, is no failed call. Last, `helm
// uninstall` leaves no object of the release behind.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Sandbox } from "e2b";
import { LEASE_NAME } from "#services/sandbox-apiserver/warmpool/leader.ts";
import { kubectl } from "#tests/kube/kubectl.ts";
import type { RunningStack } from "#tests/e2e/stack/run-stack.ts";
import { helmBinary } from "#tests/kube/peers.ts";
import { run } from "#tests/support/run.ts";
import { waitFor } from "#tests/support/wait.ts";

const NS = "sandbox-system";
const RELEASE = "sandbox-operator";

interface Call {
  client: "sdk" | "kubectl";
  ok: boolean;
  at: number;
  error?: string;
}

/** The loop's record, and what it saw between two marks. */
class ClientLoop {
  readonly calls: Call[] = [];
  private stopped = false;
  private readonly workers: Promise<void>[] = [];

  constructor(private readonly env: Record<string, string>) {}

  start(): void {
    const opts = { apiKey: this.env.E2B_API_KEY!, apiUrl: this.env.E2B_API_URL!, sandboxUrl: this.env.E2B_SANDBOX_URL! };
    for (let w = 0; w < 2; w++) {
      this.workers.push(
        (async () => {
          while (!this.stopped) {
            // Each worker starts at most one sandbox per 1.5 s: together under the chart's default per-namespace
            // start rate (2/s, counted per replica), which a tenant would otherwise hit by design.
            const next = performance.now() + 1500;
            await this.record("sdk", async () => {
              const sb = await Sandbox.create("base", { ...opts, timeoutMs: 120_000 });
              try {
                const r = await sb.commands.run("echo ok");
                if (r.stdout !== "ok\n") throw new Error(`command printed ${JSON.stringify(r.stdout)}`);
              } finally {
                await sb.kill();
              }
            });
            await Bun.sleep(Math.max(0, next - performance.now()));
          }
        })(),
      );
    }
    this.workers.push(
      (async () => {
        while (!this.stopped) {
          await this.record("kubectl", async () => {
            const r = await kubectl(["get", "sandboxes", "-A", "--request-timeout=20s"], { kubeconfig: this.env.KUBECONFIG! });
            if (r.code !== 0) throw new Error(r.stderr.trim());
          });
          await Bun.sleep(300);
        }
      })(),
    );
  }

  private async record(client: Call["client"], fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
      this.calls.push({ client, ok: true, at: performance.now() });
    } catch (err) {
      this.calls.push({ client, ok: false, at: performance.now(), error: (err as Error).message.split("\n")[0] });
      await Bun.sleep(200);
    }
  }

  mark(): number {
    return performance.now();
  }

  /** Calls made, failed, and each client's longest gap between successes, in [from, now]. */
  report(from: number): { made: number; failed: number; longestGapMs: Record<string, number>; errors: string[] } {
    const window = this.calls.filter((c) => c.at >= from);
    const longestGapMs: Record<string, number> = {};
    for (const client of ["sdk", "kubectl"] as const) {
      let last = from;
      let gap = 0;
      for (const c of window.filter((x) => x.client === client && x.ok)) {
        gap = Math.max(gap, c.at - last);
        last = c.at;
      }
      longestGapMs[client] = Math.round(Math.max(gap, performance.now() - last));
    }
    const failed = window.filter((c) => !c.ok);
    return { made: window.length, failed: failed.length, longestGapMs, errors: [...new Set(failed.map((c) => `${c.client}: ${c.error}`))].slice(0, 5) };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.workers);
  }
}

/**
 * Every warn-or-worse line the release's containers write, read from the node's pod log files once a second (a
 * replaced Pod's logs go with it, so asking kubectl after a failure is too late).
 */
class WarningCollector {
  readonly lines: Array<{ at: number; line: string }> = [];
  private readonly offsets = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly podLogsDir: string) {}

  start(): void {
    this.timer = setInterval(() => this.scan(), 1000);
  }

  private scan(): void {
    let dirs: string[] = [];
    try {
      dirs = readdirSync(this.podLogsDir).filter((d) => d.startsWith(`${NS}_`));
    } catch {
      return;
    }
    for (const d of dirs) {
      try {
        for (const c of readdirSync(join(this.podLogsDir, d))) {
          for (const f of readdirSync(join(this.podLogsDir, d, c))) {
            const file = join(this.podLogsDir, d, c, f);
            const from = this.offsets.get(file) ?? 0;
            const text = readFileSync(file, "utf8");
            this.offsets.set(file, text.length);
            for (const l of text.slice(from).split("\n")) {
              if (/"level":(40|50|60)/.test(l)) this.lines.push({ at: performance.now(), line: `${d.split("_")[1]}: ${l.slice(0, 700)}` });
            }
          }
        }
      } catch {
        // the Pod's directory went away mid-scan
      }
    }
  }

  since(from: number): string[] {
    return this.lines.filter((l) => l.at >= from).map((l) => l.line);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

interface PodInfo {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  spec: { containers: Array<{ image: string }> };
  status: { conditions?: Array<{ type: string; status: string }> };
}

export function operations(getStack: () => RunningStack): void {
  describe("operations with clients connected", () => {
    let loop: ClientLoop;
    let warnings: WarningCollector;
    const figures: string[] = [];
    const k = (args: string[]) => kubectl(args, { kubeconfig: getStack().env.KUBECONFIG! });
    const json = async <T>(args: string[]): Promise<T> => {
      const r = await k([...args, "-o", "json"]);
      if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
      return JSON.parse(r.stdout) as T;
    };
    const readyPods = async (app: string) =>
      (await json<{ items: PodInfo[] }>(["-n", NS, "get", "pods", "-l", `app.kubernetes.io/name=${app}`])).items.filter(
        (p) => !p.metadata.deletionTimestamp && p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
      );
    const helm = async (args: string[]) => {
      const r = await run([await helmBinary(), ...args, "--kubeconfig", getStack().env.KUBECONFIG!], { timeoutMs: 900_000 });
      if (r.code !== 0) throw new Error(`helm ${args.join(" ")}: ${r.stderr}`);
      return r.stdout;
    };
    /** Runs `op` with the loop going; records and asserts its figures. */
    const during = async (name: string, op: () => Promise<string>) => {
      const from = loop.mark();
      const detail = await op();
      await Bun.sleep(3000); // clients keep calling a little after the change settles
      const r = loop.report(from);
      const line = `${name}: ${detail}; client calls ${r.made}, failed ${r.failed}, longest gap sdk ${r.longestGapMs.sdk} ms, kubectl ${r.longestGapMs.kubectl} ms${r.errors.length ? `; errors: ${r.errors.join(" | ")}` : ""}`;
      figures.push(line);
      console.log(`operations: ${line}`);
      if (r.failed) console.log(`operations: what the release's Pods logged at warn or above meanwhile:\n${warnings.since(from).slice(-30).join("\n")}`);
      expect(r.made).toBeGreaterThan(0);
      expect(r.errors).toEqual([]);
    };

    beforeAll(async () => {
      const socket = /ctr --address (\S+)/.exec(getStack().out.join("\n"))![1]!;
      warnings = new WarningCollector(join(dirname(dirname(socket)), "pod-logs"));
      warnings.start();
      loop = new ClientLoop(getStack().env);
      loop.start();
      await waitFor("the client loop's first successful calls", async () => (loop.calls.filter((c) => c.ok).length >= 3 ? true : undefined), 300_000);
    }, 320_000);

    afterAll(async () => {
      await loop?.stop();
      warnings?.stop();
      console.log(`operations figures:\n${figures.join("\n")}`);
    });

    test("the warm-pool leader's Pod deleted: the other replica takes the Lease, and the pool status keeps moving", async () => {
      await during("leader Pod deleted", async () => {
        const lease = await json<{ spec: { holderIdentity: string } }>(["-n", NS, "get", "lease", LEASE_NAME]);
        const holder = lease.spec.holderIdentity;
        const pods = await readyPods("sandbox-apiserver");
        const leader = pods.find((p) => holder.includes(p.metadata.name));
        expect(leader).toBeDefined();
        const t0 = performance.now();
        const del = await k(["-n", NS, "delete", "pod", leader!.metadata.name, "--wait=false"]);
        expect(del.code).toBe(0);
        const next = await waitFor("another replica holds the Lease", async () => {
          const l = await json<{ spec: { holderIdentity?: string } }>(["-n", NS, "get", "lease", LEASE_NAME]);
          const h = l.spec.holderIdentity;
          return h && !h.includes(leader!.metadata.name) ? h : undefined;
        }, 120_000);
        const took = (performance.now() - t0) / 1000;
        // The seed's bounds: lease 15 s, renew deadline 10 s, retry 2 s; a released lease is taken at the next retry.
        expect(took).toBeLessThan(30);
        // The new leader drives the pool: a change of replicas shows in its status.
        const pools = await json<{ items: Array<{ metadata: { name: string; namespace: string }; spec: { replicas: number } }> }>(["get", "sandboxwarmpools", "-A"]);
        const p = pools.items[0]!;
        const want = p.spec.replicas + 1;
        expect((await k(["-n", p.metadata.namespace, "patch", "sandboxwarmpool", p.metadata.name, "--type=merge", "-p", JSON.stringify({ spec: { replicas: want } })])).code).toBe(0);
        await waitFor("the pool's status follows the new replicas", async () => {
          const s = await json<{ status?: { replicas?: number } }>(["-n", p.metadata.namespace, "get", "sandboxwarmpool", p.metadata.name]);
          return s.status?.replicas === want ? true : undefined;
        }, 120_000);
        return `Lease moved to ${next} in ${took.toFixed(1)} s`;
      });
    }, 600_000);

    test("helm upgrade to an image with another tag: a rolling update under the PDB", async () => {
      await during("helm upgrade (new tag)", async () => {
        const socket = /ctr --address (\S+)/.exec(getStack().out.join("\n"))![1]!;
        const tag = /localhost\/sandbox-apiserver:(\S+)/.exec((await k(["-n", NS, "get", "deploy", "sandbox-apiserver", "-o", "jsonpath={.spec.template.spec.containers[0].image}"])).stdout)![1]!;
        const next = `${tag}-upgrade`;
        for (const image of ["sandbox-apiserver", "sandbox-envd-proxy"]) {
          const r = await run(["ctr", "--address", socket, "--namespace", "k8s.io", "images", "tag", "--force", `localhost/${image}:${tag}`, `localhost/${image}:${next}`]);
          expect(`${r.code} ${r.stderr}`).toBe("0 ");
        }
        const t0 = performance.now();
        await helm(["upgrade", RELEASE, "chart", "--namespace", NS, "--reuse-values", "--set-string", `apiserver.image.tag=${next}`, "--set-string", `envdProxy.image.tag=${next}`, "--wait", "--timeout", "10m"]);
        const templates = (await k(["-n", NS, "get", "deploy", "-o", "jsonpath={.items[*].spec.template.spec.containers[0].image}"])).stdout.split(" ");
        expect(templates.every((i) => i.endsWith(`:${next}`))).toBe(true);
        await waitFor("every serving Pod on the new tag", async () => {
          const serving = [...(await readyPods("sandbox-apiserver")), ...(await readyPods("sandbox-envd-proxy"))];
          return serving.length === 4 && serving.every((p) => p.spec.containers[0]!.image.endsWith(`:${next}`)) ? true : undefined;
        }, 300_000);
        return `rolled to ${next} in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
      });
    }, 900_000);

    test("helm rollback to the first revision", async () => {
      await during("helm rollback", async () => {
        const t0 = performance.now();
        await helm(["rollback", RELEASE, "1", "--namespace", NS, "--wait", "--timeout", "10m"]);
        const images = (await k(["-n", NS, "get", "deploy", "-o", "jsonpath={.items[*].spec.template.spec.containers[0].image}"])).stdout.split(" ");
        expect(images.some((i) => i.endsWith("-upgrade"))).toBe(false);
        await waitFor("every Pod of revision 1 Ready", async () => ((await readyPods("sandbox-apiserver")).length === 2 && (await readyPods("sandbox-envd-proxy")).length === 2 ? true : undefined), 300_000);
        return `rolled back in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
      });
    }, 900_000);

    test("each apiserver replica evicted in turn through the Eviction API: the PDB keeps one serving", async () => {
      await during("evictions", async () => {
        const evict = async (name: string) => {
          const body = JSON.stringify({ apiVersion: "policy/v1", kind: "Eviction", metadata: { name, namespace: NS } });
          return kubectl(["create", "--raw", `/api/v1/namespaces/${NS}/pods/${name}/eviction`, "-f", "-"], { kubeconfig: getStack().env.KUBECONFIG!, stdin: body });
        };
        const [a, b] = (await readyPods("sandbox-apiserver")).map((p) => p.metadata.name);
        expect((await evict(a!)).code).toBe(0);
        // While a's replacement is not Ready, the PDB (minAvailable 1) refuses b's eviction.
        const refused = await evict(b!);
        const refusedNow = refused.code !== 0 && /disruption budget|TooManyRequests|429/i.test(refused.stderr);
        await waitFor("a's replacement Ready", async () => ((await readyPods("sandbox-apiserver")).filter((p) => p.metadata.name !== a).length === 2 ? true : undefined), 300_000);
        expect((await evict(b!)).code).toBe(0);
        await waitFor("b's replacement Ready", async () => ((await readyPods("sandbox-apiserver")).filter((p) => p.metadata.name !== a && p.metadata.name !== b).length === 2 ? true : undefined), 300_000);
        return `evicted ${a} then ${b}; the second eviction ${refusedNow ? "was refused by the PDB until the first replacement was Ready" : "was admitted at once (the replacement was already Ready)"}`;
      });
    }, 900_000);

    test("helm uninstall leaves no object of the release behind", async () => {
      await loop.stop();
      await helm(["uninstall", RELEASE, "--namespace", NS, "--wait", "--timeout", "5m"]);
      // The Deployments are gone at once; their Pods go through the preStop sleep and the garbage collector.
      await waitFor("the release's objects gone", async () => {
        const left = await k(["get", "all,secrets,configmaps,serviceaccounts,roles,rolebindings,poddisruptionbudgets", "-n", NS, "-l", `app.kubernetes.io/instance=${RELEASE}`, "-o", "name"]);
        return left.code === 0 && left.stdout.trim() === "" ? true : undefined;
      }, 120_000);
      const cluster = await k(["get", "clusterroles,clusterrolebindings,apiservices,validatingadmissionpolicies,validatingadmissionpolicybindings", "-o", "name"]);
      // (The CRDs' own APIServices, such as v1beta1.extensions.agents.x-k8s.io, are not the release's.)
      expect(cluster.stdout.split("\n").filter((l) => /sandbox-apiserver|sandbox-envd-proxy|\/v1beta1\.agents\.x-k8s\.io$/.test(l))).toEqual([]);
      const authReader = await k(["-n", "kube-system", "get", "rolebinding", "sandbox-apiserver-auth-reader"]);
      expect(authReader.code).not.toBe(0);
    }, 600_000);
  });
}
