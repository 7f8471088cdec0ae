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
      reason: 'address host 127.0.0.1 is none of Node "a"\'s addresses',
    });
    expect(inventoryTrust(inv("a", "http://"), node("a", "10.0.0.1"), none)).toEqual({ trusted: false, reason: "no address host" });
  });
  test("a host that is only a prefix of a Node address, or that a Node address is a prefix of, is none of its addresses (issue 31)", () => {
    expect(inventoryTrust(inv("a", "10.0.0.1:7777"), node("a", "10.0.0.10", "a"), none).trusted).toBe(false);
    expect(inventoryTrust(inv("a", "10.0.0.10:7777"), node("a", "10.0.0.1", "a"), none).trusted).toBe(false);
    expect(inventoryTrust(inv("node-1", "node-1:7777"), node("node-1", "10.0.0.5", "node-1.internal"), none).trusted).toBe(false);
    expect(inventoryTrust(inv("a", "10.0.0.10:7777"), node("a", "10.0.0.10", "a"), none)).toEqual({ trusted: true });
  });
  test("an inventory without an address (no reader calls it) counts under its Node, never without one", () => {
    expect(inventoryTrust({ metadata: { name: "a" }, node: "a" }, node("a", "10.0.0.1"), none)).toEqual({ trusted: true });
    expect(inventoryTrust({ metadata: { name: "a" }, node: "a", address: "" }, undefined, none).trusted).toBe(false);
  });
  test("with trusted networks set, the host must be one of the Node's addresses AND lie in a network, IPv4 and IPv6", () => {
    const nets = new TrustedNetworks(["10.8.0.0/16", "fd00::/8"]);
    expect(inventoryTrust(inv("a", "10.8.3.4:7777"), node("a", "10.8.3.4"), nets)).toEqual({ trusted: true });
    expect(inventoryTrust(inv("a", "[fd00::5]:7777"), node("a", "fd00::5"), nets)).toEqual({ trusted: true });
    // In a network but not the Node's: another machine of the node network is not this node.
    expect(inventoryTrust(inv("a", "10.8.3.4:7777"), node("a", "10.0.0.1"), nets)).toEqual({
      trusted: false,
      reason: 'address host 10.8.3.4 is none of Node "a"\'s addresses',
    });
    expect(inventoryTrust(inv("a", "10.8.3.4:7777"), undefined, nets).trusted).toBe(false);
  });
  test("with trusted networks set, a Node that registered an address outside them (the attack) is refused", () => {
    // A node identity whose Node did not exist created it with InternalIP = a host it controls, and an inventory
    // pointing there: the Node vouches, the operator's networks do not.
    const nets = new TrustedNetworks(["10.8.0.0/16"]);
    expect(inventoryTrust(inv("a", "203.0.113.9:7777"), node("a", "203.0.113.9"), nets)).toEqual({
      trusted: false,
      reason: "address host 203.0.113.9 is in no network of --inventory-trusted-networks",
    });
    // A name is never "in" a network, even when it is one of the Node's addresses.
    expect(inventoryTrust(inv("a", "a:7777"), node("a", "10.8.0.1", "a"), nets).trusted).toBe(false);
  });
  test("a malformed network is refused with the entry", () => {
    expect(() => new TrustedNetworks(["10.0.0.0/33"])).toThrow('trusted network "10.0.0.0/33": prefix length out of range');
    expect(() => new TrustedNetworks(["node-a/8"])).toThrow("not an IP address");
  });
});
