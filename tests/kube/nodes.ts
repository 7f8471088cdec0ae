// A Node that vouches for a NodeInventory's address (shared/fleet/trust.ts): every inventory reader ignores an
// inventory unless a Node of its name exists with the address host among its status.addresses, so a test that
// publishes an inventory by hand registers the Node as vk-sandbox would have.
import { isIP } from "node:net";
import { addressHost } from "#shared/config/index.ts";
import type { TestCluster } from "./harness.ts";

/**
 * Creates Node `name` (once) and sets its addresses so that `address`'s host is one of them; an empty address (an
 * inventory no reader calls) needs only the Node.
 */
export async function vouchingNode(cluster: Pick<TestCluster, "adminFetch">, name: string, address = ""): Promise<void> {
  const host = addressHost(address);
  if (address && !host) throw new Error(`vouchingNode ${name}: no host in address "${address}"`);
  const created = await cluster.adminFetch("/api/v1/nodes", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "v1", kind: "Node", metadata: { name } }),
  });
  if (!created.ok && created.status !== 409) throw new Error(`create Node ${name}: ${created.status} ${await created.text()}`);
  await created.body?.cancel();
  if (!host) return;
  const addresses = [isIP(host) ? { type: "InternalIP", address: host } : { type: "Hostname", address: host }];
  const patched = await cluster.adminFetch(`/api/v1/nodes/${name}/status`, {
    method: "PATCH",
    headers: { "content-type": "application/merge-patch+json" },
    body: JSON.stringify({ status: { addresses } }),
  });
  if (!patched.ok) throw new Error(`Node ${name} addresses: ${patched.status} ${await patched.text()}`);
  await patched.body?.cancel();
}

/** One row of a hand-published inventory (the single form's entry, as vk-sandbox writes it). */
export type InventoryEntry = { id: string; name: string; phase: string } & Record<string, unknown>;

/**
 * Applies node `node`'s NodeInventory in the single form, as vk-sandbox publishes it (publishedAt at whole seconds,
 * default now). The caller registers the vouching Node (vouchingNode) when a reader must trust the address.
 */
export async function applyInventory(cluster: Pick<TestCluster, "apply">, inv: { node: string; address: string; entries: InventoryEntry[]; publishedAt?: Date }): Promise<void> {
  await cluster.apply([
    {
      apiVersion: "sandbox.cocoonstack.io/v1beta1",
      kind: "NodeInventory",
      metadata: { name: inv.node },
      node: inv.node,
      address: inv.address,
      publishedAt: (inv.publishedAt ?? new Date()).toISOString().replace(/\.\d{3}Z$/, "Z"),
      entries: inv.entries,
    },
  ]);
}
