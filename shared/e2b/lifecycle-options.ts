// The e2b SDK's lifecycle and snapshot-kind options, and what this surface does with each (docs/e2b.md "Lifecycle
// options"; issue 28 item 4). sandboxd has one kind of pause: hibernate, which writes the whole VM (memory and
// disk) out and restores it with its processes; and one kind of checkpoint, which also keeps memory. So:
//   - a full pause (create `autoPause` + `autoPauseMemory: true`: JS `lifecycle.onTimeout: {action: "pause",
//     keepMemory: true}`, Python `{"action": "pause", "mode": "full"}`) is exactly what we do: accepted;
//   - a filesystem-only pause or snapshot (`autoPauseMemory: false`, pause `memory: false`, snapshot
//     `memory: false`: JS `keepMemory: false`, Python `mode="filesystem"`) is answered 400 saying so, never
//     served as a silent full snapshot (the caller asked for a cold boot on resume and would not get one);
//   - `autoResume: {enabled: true}` is what the node does anyway (any data-plane access with the sandbox's token
//     wakes it); `{enabled: false}` cannot be honoured (the node has no per-claim passive mode), so it is a 400.
// Each function returns the refusal, or null when the option is served.
import { E2bError, badRequest } from "./errors.ts";

/** Create-time lifecycle fields as the SDKs send them (POST /sandboxes, /v2/sandboxes). */
export interface LifecycleFields {
  autoPause?: boolean;
  autoPauseMemory?: boolean;
  autoResume?: { enabled?: boolean };
}

const HIBERNATE = "sandboxd pauses by hibernating the whole VM, memory included";

/** The create's lifecycle options: a 400 for the ones this fleet cannot honour. */
export function lifecycleRefusal(b: LifecycleFields): E2bError | null {
  if (b.autoPauseMemory === false) {
    return badRequest(
      `autoPauseMemory: false (lifecycle.onTimeout keepMemory: false / mode "filesystem", a filesystem-only auto-pause) is not supported: ${HIBERNATE}, and a paused sandbox resumes with its processes; use keepMemory: true / mode "full" or leave it out`,
    );
  }
  if (b.autoResume?.enabled === false) {
    return badRequest(
      "autoResume: {enabled: false} is not supported: data-plane traffic with the sandbox's access token always wakes a paused sandbox here (the node wakes a hibernated VM on any access with its token); leave autoResume out or set it to true",
    );
  }
  return null;
}

/** POST /sandboxes/{id}/pause `memory`: only a full pause exists. */
export function pauseRefusal(memory: boolean | undefined): E2bError | null {
  if (memory !== false) return null;
  return badRequest(
    `pause with memory: false (keepMemory: false / mode "filesystem", a filesystem-only pause) is not supported: ${HIBERNATE}; pause without the option or with mode "full"`,
  );
}

/** POST /sandboxes/{id}/snapshots `memory`: a checkpoint always captures memory and filesystem. */
export function snapshotRefusal(memory: boolean | undefined): E2bError | null {
  if (memory !== false) return null;
  return badRequest(
    'snapshot with memory: false (mode "filesystem", a filesystem-only snapshot) is not supported: a snapshot here always captures memory and filesystem, and sandboxes created from it resume its processes; take it without the option or with mode "full"',
  );
}
