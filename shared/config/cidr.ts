// One CIDR check for every flag that takes networks (--inventory-trusted-networks).
import { isIP } from "node:net";

/** Why `raw` is not a CIDR (`10.0.0.0/8`, `fd00::/8`); undefined when it is one. */
export function cidrProblem(raw: string): string | undefined {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(raw.trim());
  if (!m) return "not an ip/prefix network";
  const family = isIP(m[1]!);
  if (family === 0) return "not an IP address before the /";
  if (Number(m[2]) > (family === 6 ? 128 : 32)) return "prefix length out of range";
  return undefined;
}
