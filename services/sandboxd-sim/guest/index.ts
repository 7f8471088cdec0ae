// services/sandboxd-sim/guest — the folder's front door: what other folders may import from it.
export { execInGuest } from "./exec.ts";
export { GuestHost, type GuestHostOptions } from "./host.ts";
export { hostIsolation, isolationLine, type Isolation } from "./isolation.ts";
