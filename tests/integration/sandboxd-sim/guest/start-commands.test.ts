// What a promoted template keeps as its start commands (guest/captures.ts): the commands still running in the
// source at promote time, oldest first, at most MAX_START_COMMANDS of them; not terminal sessions, not commands
// that have ended. Checked on the process-sandbox guest (any host) through the simulator's own promote and claim;
// the namespaced path and the stock SDK are in promote-e2b.test.ts.
import { waitFor } from "#tests/support/wait.ts";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { MAX_START_COMMANDS } from "#services/sandboxd-sim/guest/captures.ts";

const ROOT = "start-cmd-root";
let sim: SandboxdSim;
beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["base/none/small=1"], guestAgents: { isolation: "process" } });
});
afterAll(() => sim.stop());

const auth = { authorization: `Bearer ${ROOT}` };
const claim = async (template: string) => {
  const r = await fetch(`${sim.url}/v1/claim`, { method: "POST", headers: auth, body: JSON.stringify({ template }) });
  expect(r.status).toBe(200);
  return ((await r.json()) as { id: string }).id;
};

test("a clone re-runs the source's running commands (oldest first, capped), not its terminals or ended commands", async () => {
  const src = sim.node.guestHost!.get(await claim("base"))!;
  const srcId = src.id;
  await src.ready;
  const run = (args: string[], o: { pty?: boolean } = {}) =>
    src.processes.start({ cmd: "/bin/sh", args, envs: { MARK: "from-source" } }, { stdin: false, ...(o.pty ? { pty: { cols: 80, rows: 24 } } : {}), ...src.launch(undefined, undefined, { MARK: "from-source" }) }, () => {});
  const ended = await run(["-c", "exit 0"]);
  await waitFor("the short command ended", () => (ended.ended ? true : undefined));
  await run(["-c", "exec sleep 300"], { pty: true });
  for (let i = 0; i < MAX_START_COMMANDS + 2; i++) await run(["-c", `echo "$MARK $E2B_SANDBOX_ID" > started-${i}; exec sleep 300`]);
  const pr = await fetch(`${sim.url}/v1/sandboxes/${srcId}/promote`, { method: "POST", headers: auth, body: JSON.stringify({ token: "", template: "kept:v1" }) });
  expect(pr.status).toBe(200);
  const clone = sim.node.guestHost!.get(await claim("kept:v1"))!;
  const procs = await waitFor("the clone's start commands", () => {
    const l = clone.processes.list();
    return l.length >= MAX_START_COMMANDS ? l : undefined;
  });
  expect(procs.length).toBe(MAX_START_COMMANDS);
  expect(procs.every((p) => !p.pty)).toBe(true);
  // The oldest MAX_START_COMMANDS, each with its own request env; none of the ended or terminal commands.
  expect(procs.map((p) => p.config.args[1]).sort()).toEqual(Array.from({ length: MAX_START_COMMANDS }, (_, i) => `echo "$MARK $E2B_SANDBOX_ID" > started-${i}; exec sleep 300`).sort());
  for (let i = 0; i < MAX_START_COMMANDS; i++) {
    const f = Bun.file(clone.paths.toHost(`/home/user/started-${i}`));
    // The copied layer holds the source's file; the clone's own run rewrites it with the clone's id.
    const mine = `from-source ${clone.id}\n`;
    expect(await waitFor(`started-${i} by the clone`, async () => ((await f.exists()) && (await f.text()) === mine ? mine : undefined))).toBe(mine);
  }
});
