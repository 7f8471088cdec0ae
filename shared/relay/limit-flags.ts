// The relay's bounds as flags (limits.ts), one table for both binaries that run the relay: sandbox-envd-proxy takes
// them bare (`--max-relays`), sandbox-e2b under its in-process proxy's prefix (`--envd-proxy-max-relays`).
import { durationFlag, intFlag, type DurationValue, type FlagSpec } from "../config/index.ts";
import { DEFAULT_RELAY_LIMITS, type RelayLimitOptions } from "./limits.ts";

export interface RelayLimitFlagValues {
  maxRelays: number;
  maxRelaysPerSandbox: number;
  maxRelaysPerClient: number;
  maxRelaysPerNamespace: number;
  maxPublicRelays: number;
  maxPublicRelaysPerSandbox: number;
  maxPublicRelaysPerClient: number;
  relayBufferMax: number;
  guestHandshakeTimeout: DurationValue;
  wakeTimeout: DurationValue;
  requestBodyMinRate: number;
  requestBodyRateWindow: DurationValue;
}

type Table<P extends string> = { [K in keyof RelayLimitFlagValues as `${P}${Capitalize<K & string>}`]: FlagSpec<RelayLimitFlagValues[K]> };

const d = DEFAULT_RELAY_LIMITS;

function rows(prefix: string) {
  return {
    maxRelays: intFlag({
      flag: `${prefix}max-relays`,
      default: String(d.maxRelays),
      min: 1,
      help: "Relays (guest HTTP requests and WebSockets) open at once in this process; one more answers 503.",
    }),
    maxRelaysPerSandbox: intFlag({
      flag: `${prefix}max-relays-per-sandbox`,
      default: String(d.maxRelaysPerSandbox),
      min: 1,
      help: "Relays open at once to one sandbox; one more answers 429.",
    }),
    maxRelaysPerClient: intFlag({
      flag: `${prefix}max-relays-per-client`,
      default: String(d.maxRelaysPerClient),
      min: 0,
      help: "Relays open at once from one client address; one more answers 429. 0 means no cap (behind an edge every client shares its address).",
    }),
    maxRelaysPerNamespace: intFlag({
      flag: `${prefix}max-relays-per-namespace`,
      default: String(d.maxRelaysPerNamespace),
      min: 0,
      help: "Relays open at once to the sandboxes of one namespace (one tenant); one more answers 429. Keep it below --max-relays so one tenant cannot take every slot; 0 means no cap.",
    }),
    maxPublicRelays: intFlag({
      flag: `${prefix}max-public-relays`,
      default: String(d.maxPublicRelays),
      min: 1,
      help: "Relays without a credential (a public sandbox's user port, no token) open at once in this process; one more answers 503. They count toward --max-relays but never toward a tenant's --max-relays-per-namespace; taken as at most --max-relays minus 1.",
    }),
    maxPublicRelaysPerSandbox: intFlag({
      flag: `${prefix}max-public-relays-per-sandbox`,
      default: String(d.maxPublicRelaysPerSandbox),
      min: 1,
      help: "Relays without a credential open at once to one sandbox; one more answers 429. The sandbox's token holders keep their own --max-relays-per-sandbox.",
    }),
    maxPublicRelaysPerClient: intFlag({
      flag: `${prefix}max-public-relays-per-client`,
      default: String(d.maxPublicRelaysPerClient),
      min: 0,
      help: "Relays without a credential open at once from one client address; one more answers 429. 0 means no cap (behind an edge every client shares its address: raise it there).",
    }),
    relayBufferMax: intFlag({
      flag: `${prefix}relay-buffer-max`,
      default: String(d.bufferBytes),
      min: 1,
      help: "Bytes the proxy holds for slow readers across every relay; past it, streams whose client is behind pause at the guest.",
    }),
    guestHandshakeTimeout: durationFlag({
      flag: `${prefix}guest-handshake-timeout`,
      default: `${d.guestHandshakeMs / 1000}s`,
      positive: true,
      help: "How long a guest may take to answer a request head (after the last request-body byte) or a WebSocket upgrade; past it the client gets 504 and the tunnel closes.",
    }),
    wakeTimeout: durationFlag({
      flag: `${prefix}wake-timeout`,
      default: `${d.wakeTimeoutMs / 1000}s`,
      positive: true,
      help: "How long a request with a sandbox's token may wait for the sandbox's node to wake it when the fleet view shows it asleep (hibernated or archived): the node dial and its answer together. Past it the client gets 504 `sandbox was asleep and did not wake in time`, the relay's slot is freed, and the node's wake goes on, so a later request is served. The request holds its relay slot while it waits.",
    }),
    requestBodyMinRate: intFlag({
      flag: `${prefix}request-body-min-rate`,
      default: String(d.requestBodyMinRate),
      min: 0,
      help: "Bytes per second a request body still arriving must bring, counted over each --request-body-rate-window; slower, the client gets 408 and the tunnel closes (a body dripped a byte at a time held its relay slot forever). 0 means no minimum.",
    }),
    requestBodyRateWindow: durationFlag({
      flag: `${prefix}request-body-rate-window`,
      default: `${d.requestBodyRateWindowMs / 1000}s`,
      positive: true,
      help: "The window --request-body-min-rate is counted over.",
    }),
  };
}

/** The rows for sandbox-envd-proxy. */
export const relayLimitFlags = rows("");

/** The rows for sandbox-e2b's in-process proxy, keyed envdProxyMaxRelays and so on. */
export const envdProxyRelayLimitFlags: Table<"envdProxy"> = (() => {
  const r = rows("envd-proxy-");
  return {
    envdProxyMaxRelays: r.maxRelays,
    envdProxyMaxRelaysPerSandbox: r.maxRelaysPerSandbox,
    envdProxyMaxRelaysPerClient: r.maxRelaysPerClient,
    envdProxyMaxRelaysPerNamespace: r.maxRelaysPerNamespace,
    envdProxyMaxPublicRelays: r.maxPublicRelays,
    envdProxyMaxPublicRelaysPerSandbox: r.maxPublicRelaysPerSandbox,
    envdProxyMaxPublicRelaysPerClient: r.maxPublicRelaysPerClient,
    envdProxyRelayBufferMax: r.relayBufferMax,
    envdProxyGuestHandshakeTimeout: r.guestHandshakeTimeout,
    envdProxyWakeTimeout: r.wakeTimeout,
    envdProxyRequestBodyMinRate: r.requestBodyMinRate,
    envdProxyRequestBodyRateWindow: r.requestBodyRateWindow,
  };
})();

/** Parsed flag values to the relay's options. */
export function relayLimitsFrom(v: RelayLimitFlagValues): RelayLimitOptions {
  return {
    maxRelays: v.maxRelays,
    maxRelaysPerSandbox: v.maxRelaysPerSandbox,
    maxRelaysPerClient: v.maxRelaysPerClient,
    maxRelaysPerNamespace: v.maxRelaysPerNamespace,
    maxPublicRelays: v.maxPublicRelays,
    maxPublicRelaysPerSandbox: v.maxPublicRelaysPerSandbox,
    maxPublicRelaysPerClient: v.maxPublicRelaysPerClient,
    bufferBytes: v.relayBufferMax,
    guestHandshakeMs: v.guestHandshakeTimeout.ms,
    wakeTimeoutMs: v.wakeTimeout.ms,
    requestBodyMinRate: v.requestBodyMinRate,
    requestBodyRateWindowMs: v.requestBodyRateWindow.ms,
    chunkRatePerNamespace: d.chunkRatePerNamespace,
  };
}
