// sandbox-envd-proxy as a real process on a real kube-apiserver: the odd request shapes get 4xx envelopes and
// nothing of Bun's development page, the process prints only JSON log lines, and its series are served on
// --metrics-bind-address alone (the public listener answers /metrics as a path naming no sandbox).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startKubeFixture, type KubeFixture } from "../vk-sandbox/kube-fixture.ts";
import { spawnService, type Child } from "../e2b/process.ts";
import { envelopeOf, leaks, oddRequests, rawRequest } from "./raw.ts";

let kube: KubeFixture;
let dir: string;
let proxy: Child;
let port: number;
let metricsPort: number;

beforeAll(async () => {
  kube = await startKubeFixture({ crd: true });
  dir = mkdtempSync(join(tmpdir(), "envelopes-proxy-"));
  writeFileSync(join(dir, "secret"), "proxy-secret");
  writeFileSync(join(dir, "token"), "root-token\n");
  proxy = spawnService(
    "sandbox-envd-proxy",
    ["--bind-address=127.0.0.1:0", "--domain=px.test", `--e2b-envd-secret-file=${join(dir, "secret")}`, `--sandboxd-token-file=${join(dir, "token")}`, "--metrics-bind-address=127.0.0.1:0"],
    { KUBECONFIG: kube.cluster.kubeconfig() },
  );
  port = Number((await proxy.waitFor("envd proxy listening", 60_000)).port);
  metricsPort = Number((await proxy.waitFor("metrics listening")).port);
}, 180_000);
afterAll(async () => {
  await proxy?.stop();
  await kube?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("every odd request is a 4xx envelope with nothing of the development page; the process prints only JSON lines", async () => {
  for (const [name, head] of [...oddRequests("127.0.0.1"), ["CONNECT on a sandbox host", "CONNECT /x HTTP/1.1\r\nHost: 49983-sb-0000000000000001.px.test"] as [string, string]]) {
    const r = await rawRequest(port, `${head}\r\nConnection: close`);
    expect({ name, leaks: leaks(r.raw), fourxx: r.status >= 400 && r.status < 500, code: envelopeOf(r.body)?.code }).toEqual({ name, leaks: [], fourxx: true, code: r.status });
  }
  const notJson = proxy
    .output()
    .split("\n")
    .filter((l) => {
      if (l.trim() === "") return false;
      try {
        JSON.parse(l);
        return false;
      } catch {
        return true;
      }
    });
  expect(notJson).toEqual([]);
});

test("the series are on the metrics listener only", async () => {
  const m = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
  expect(m.status).toBe(200);
  expect(await m.text()).toContain('sandbox_envd_proxy_requests_total{code="405"}');
  const pub = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect([pub.status, await pub.json()]).toEqual([400, { code: 400, message: "no sandbox in the request host or headers" }]);
  const healthz = await fetch(`http://127.0.0.1:${port}/healthz`);
  expect(healthz.status).toBe(204);
});
