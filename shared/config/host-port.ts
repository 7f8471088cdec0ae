// `host:port` splitting with Go's net.SplitHostPort rules, for listen and advertise addresses:
// `:10260`, `0.0.0.0:10260`, `[::1]:10260`. A bare port or a bare IPv6 address is refused.

export interface HostPort {
  host: string;
  port: string;
}

export function splitHostPort(address: string): HostPort {
  const missing = () => new Error(`address ${address}: missing port in address`);
  if (address.startsWith("[")) {
    const close = address.indexOf("]");
    if (close === -1) throw new Error(`address ${address}: missing ']' in address`);
    if (close + 1 === address.length) throw missing();
    if (address[close + 1] !== ":") throw new Error(`address ${address}: missing port in address`);
    const host = address.slice(1, close);
    const port = address.slice(close + 2);
    if (host.includes("[") || host.includes("]") || port.includes("]")) {
      throw new Error(`address ${address}: unexpected bracket in address`);
    }
    return { host, port };
  }
  const colon = address.lastIndexOf(":");
  if (colon === -1) throw missing();
  const host = address.slice(0, colon);
  if (host.includes(":")) throw new Error(`address ${address}: too many colons in address`);
  return { host, port: address.slice(colon + 1) };
}

/** Why `port` is not a usable port from `min` to 65535, or undefined when it is. */
function portProblem(port: string, min: 0 | 1): string | undefined {
  if (!/^[0-9]+$/.test(port)) return `port ${JSON.stringify(port)} is not a number`;
  const n = Number(port);
  if (n < min || n > 65535) return `port ${n} is out of range ${min}-65535`;
  return undefined;
}

/** The listening port of an address, which must be an integer from 1 to 65535. */
export function listenPort(address: string): number {
  const { port } = splitHostPort(address);
  const problem = portProblem(port, 1);
  if (problem !== undefined) throw new Error(`address ${address}: ${problem}`);
  return Number(port);
}

/**
 * A flag check for a listen address: `host:port` with a numeric port. Port 0 (any free port) is allowed
 * unless `allowZero` is false; tests bind that way.
 */
export function listenAddressCheck(allowZero = true): (value: string) => string | undefined {
  return (value) => {
    try {
      return portProblem(splitHostPort(value).port, allowZero ? 0 : 1);
    } catch (err) {
      return (err as Error).message;
    }
  };
}

/**
 * The host of a sandboxd address as NodeInventory carries it (`host:port`, `[v6]:port`, a bare host or an origin),
 * lower-cased and without brackets; undefined when there is none.
 */
export function addressHost(address: string): string | undefined {
  if (!address) return undefined;
  try {
    const host = new URL(address.includes("://") ? address : `http://${address}`).hostname.replace(/^\[|\]$/g, "").toLowerCase();
    return host || undefined;
  } catch {
    return undefined;
  }
}
