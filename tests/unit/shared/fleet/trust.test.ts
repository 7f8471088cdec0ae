// The inventory trust rule (issue 22 case 2) on its own: which address forms name which host, and the verdict for
// each way an inventory can fail to name a Node that vouches for it.
import { describe, expect, test } from "bun:test";
import { addressHost, inventoryTrust, TrustedNetworks } from "#shared/fleet/trust.ts";

const node = (name: string, ...addresses: string[]) => ({
  metadata: { name },
  status: { addresses: addresses.map((address, i) => ({ type: i === 0 ? "InternalIP" : "Hostname", address })) },
});
const inv = (name: string, address: string, nodeName = name) => ({ metadata: { name }, node: nodeName, address });
const none = new TrustedNetworks([]);

describe("addressHost", () => {
  test.each([
    ["10.0.0.1:7777", "10.0.0.1"],
    ["http://10.0.0.1:7777", "10.0.0.1"],
    ["https://Node-A.example:443/", "node-a.example"],
    ["[fd00::1]:7777", "fd00::1"],
    ["10.0.0.1", "10.0.0.1"],
  ])("%s has host %s", (address, host) => {
    expect(addressHost(address)).toBe(host);
  });
  test("an empty or unparsable address has none", () => {
    expect(addressHost("")).toBeUndefined();
    expect(addressHost("http://")).toBeUndefined();
  });
});

describe("inventoryTrust", () => {
  test("an address host among the Node's addresses is trusted, whatever the port", () => {
    expect(inventoryTrust(inv("a", "10.0.0.1:7777"), node("a", "10.0.0.1", "a"), none)).toEqual({ trusted: true });
    expect(inventoryTrust(inv("a", "a:7777"), node("a", "10.0.0.1", "a"), none)).toEqual({ trusted: true });
  });
  test("no Node, another node's name, a foreign address or no address: not trusted, with the reason", () => {
    expect(inventoryTrust(inv("a", "10.0.0.1:7777"), undefined, none)).toEqual({ trusted: false, reason: 'no Node "a" in the cluster' });
    expect(inventoryTrust(inv("x", "10.0.0.1:7777", "a"), node("a", "10.0.0.1"), none).trusted).toBe(false);
    expect(inventoryTrust(inv("a", "127.0.0.1:9"), node("a", "10.0.0.1"), none)).toEqual({
      trusted: false,
      reason: 'address host 127.0.0.1 is none of Node "a"\'s addresses and in no trusted network',
    });
    expect(inventoryTrust(inv("a", "http://"), node("a", "10.0.0.1"), none)).toEqual({ trusted: false, reason: "no address host" });
  });
  test("an inventory without an address (no reader calls it) counts under its Node, never without one", () => {
    expect(inventoryTrust({ metadata: { name: "a" }, node: "a" }, node("a", "10.0.0.1"), none)).toEqual({ trusted: true });
    expect(inventoryTrust({ metadata: { name: "a" }, node: "a", address: "" }, undefined, none).trusted).toBe(false);
  });
  test("a trusted network admits any address in it for a known Node, IPv4 and IPv6", () => {
    const nets = new TrustedNetworks(["10.8.0.0/16", "fd00::/8"]);
    expect(inventoryTrust(inv("a", "10.8.3.4:7777"), node("a", "10.0.0.1"), nets).trusted).toBe(true);
    expect(inventoryTrust(inv("a", "[fd00::5]:7777"), node("a", "10.0.0.1"), nets).trusted).toBe(true);
    expect(inventoryTrust(inv("a", "10.9.0.1:7777"), node("a", "10.0.0.1"), nets).trusted).toBe(false);
    expect(inventoryTrust(inv("a", "10.8.3.4:7777"), undefined, nets).trusted).toBe(false);
    // A name is never "in" a network.
    expect(inventoryTrust(inv("a", "evil.example:7777"), node("a", "10.0.0.1"), nets).trusted).toBe(false);
  });
  test("a malformed network is refused with the entry", () => {
    expect(() => new TrustedNetworks(["10.0.0.0/33"])).toThrow('trusted network "10.0.0.0/33": prefix length out of range');
    expect(() => new TrustedNetworks(["node-a/8"])).toThrow("not an IP address");
  });
});
