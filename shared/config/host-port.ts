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

/** The listening port of an address, which must be an integer from 1 to 65535. */
export function listenPort(address: string): number {
  const { port } = splitHostPort(address);
  if (!/^[0-9]+$/.test(port)) throw new Error(`address ${address}: port ${JSON.stringify(port)} is not a number`);
  const n = Number(port);
  if (n < 1 || n > 65535) throw new Error(`address ${address}: port ${n} is out of range 1-65535`);
  return n;
}

/**
 * A flag check for a listen address: `host:port` with a numeric port. Port 0 (any free port) is allowed
 * unless `allowZero` is false; tests bind that way.
 */
export function listenAddressCheck(allowZero = true): (value: string) => string | undefined {
  return (value) => {
    try {
      const { port } = splitHostPort(value);
      if (!/^[0-9]+$/.test(port)) return `port ${JSON.stringify(port)} is not a number`;
      const n = Number(port);
      if (n > 65535 || (!allowZero && n === 0)) return `port ${n} is out of range ${allowZero ? 0 : 1}-65535`;
      return undefined;
    } catch (err) {
      return (err as Error).message;
    }
  };
}
