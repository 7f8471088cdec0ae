// HTTPS_PROXY / NO_PROXY as client-go honours them (issue 7 case 8), against a real kube-apiserver through a real
// CONNECT proxy. The kubeconfig names the server by the machine's host name (not "localhost" or a loopback
// literal, which Go never proxies) and pins the TLS server name to one of the apiserver certificate's names, so
// the CA verification holds through the tunnel.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { KubeClient } from "#shared/kube/client.ts";
import { loadKubeConnection } from "#shared/kube/connection.ts";
import { Namespaces } from "#shared/kube/resources.ts";
import { startKubeApiserver, type TestCluster } from "#tests/kube/harness.ts";

let cluster: TestCluster;
let dir: string;
let proxy: Server;
let proxyUrl: string;
let kubeconfig: string;
const tunnels: string[] = [];

beforeAll(async () => {
  cluster = await startKubeApiserver();
  dir = mkdtempSync(join(tmpdir(), "kube-proxy-it-"));
  const apiPort = new URL(cluster.url).port;
  // A CONNECT proxy: records the requested target, tunnels to the apiserver whatever host was asked for.
  proxy = createServer((client) => {
    client.once("data", (head) => {
      const line = head.toString("latin1").split("\r\n")[0] ?? "";
      const m = /^CONNECT (\S+) HTTP\/1\.[01]$/.exec(line);
      if (!m) return void client.end("HTTP/1.1 405 Method Not Allowed\r\n\r\n");
      tunnels.push(m[1]!);
      const upstream = connect(Number(apiPort), "127.0.0.1", () => {
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        upstream.pipe(client);
        client.pipe(upstream);
      });
      upstream.on("error", () => client.destroy());
      client.on("error", () => upstream.destroy());
    });
  });
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
  const doc = parse(readFileSync(cluster.kubeconfig({ auth: "admin-cert" }), "utf8"));
  for (const c of doc.clusters) {
    c.cluster.server = `https://${hostname()}:${apiPort}`;
    c.cluster["tls-server-name"] = "kubernetes";
  }
  kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, stringify(doc));
}, 120_000);

afterAll(async () => {
  proxy?.close();
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const noSA = { serviceAccountDir: "/nonexistent" };

describe("the apiserver through HTTPS_PROXY", () => {
  test("HTTPS_PROXY set: every request tunnels through the proxy to the named server, CA verification intact", async () => {
    tunnels.length = 0;
    const client = new KubeClient(await loadKubeConnection({ KUBECONFIG: kubeconfig, HTTPS_PROXY: proxyUrl }, noSA));
    const ns = await client.get<{ metadata: { name: string } }>(Namespaces, "default");
    expect(ns.metadata.name).toBe("default");
    expect(tunnels).toContain(`${hostname()}:${new URL(cluster.url).port}`);
  });

  test("NO_PROXY naming the server: a direct connection, the proxy sees nothing", async () => {
    tunnels.length = 0;
    const conn = await loadKubeConnection({ KUBECONFIG: kubeconfig, HTTPS_PROXY: proxyUrl, NO_PROXY: `localhost,${hostname()}` }, noSA);
    expect(conn.proxyUrl).toBeUndefined();
    const ns = await new KubeClient(conn).get<{ metadata: { name: string } }>(Namespaces, "default");
    expect(ns.metadata.name).toBe("default");
    expect(tunnels).toEqual([]);
  });
});
