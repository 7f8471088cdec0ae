// services/sandboxd-sim/http — the folder's front door: what other folders may import from it.
export { type FaultRoute, Faults, type Latency, type ListFailMode } from "./faults.ts";
export { RequestLog, type RequestLogEntry } from "./reqlog.ts";
export { NodeServer } from "./server.ts";
