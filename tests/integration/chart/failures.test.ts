// A configuration that cannot run fails at render, before anything reaches the cluster: each of seed 003's
// render-time failures with its exact message (chart/README.md "Render-time failures"), and values.schema.json
// refusing mistyped or misspelt values at `helm template`, naming the value (`helm install`: cluster.test.ts).
import { describe, expect, test } from "bun:test";
import { E2B, at, chartDir, helm, merge, template, type Values } from "./helm.ts";

async function failsWith(values: Values, message: string): Promise<void> {
  const r = await template(values);
  expect(r.code).not.toBe(0);
  expect(r.stdout).toBe("");
  expect(r.stderr).toContain(message);
}

describe("render-time failures (seed 003 messages)", () => {
  const cases: [string, Values, string][] = [
    [
      "e2b without apiKeySecret.name",
      merge(E2B, at("apiserver.e2b.apiKeySecret.name", "")),
      "apiserver.e2b.apiKeySecret.name is required when apiserver.e2b.enabled is true",
    ],
    [
      "e2b without domain",
      merge(E2B, at("apiserver.e2b.domain", "")),
      "apiserver.e2b.domain is required when apiserver.e2b.enabled is true",
    ],
    [
      "e2b without envdSecret.value or .secretName",
      merge(E2B, at("apiserver.e2b.envdSecret", { value: "", secretName: "" })),
      "apiserver.e2b.envdSecret.value or apiserver.e2b.envdSecret.secretName is required when apiserver.e2b.enabled is true",
    ],
    [
      "e2b without sandboxdToken.secretName",
      merge(E2B, at("apiserver.sandboxdToken.secretName", "")),
      "apiserver.sandboxdToken.secretName is required when apiserver.e2b.enabled is true: the envd proxy reads claim tokens with it",
    ],
    [
      "certManager off without caBundle",
      at("certManager.enabled", false),
      "certManager.caBundle is required when certManager.enabled is false",
    ],
    ["empty apiserver image tag", at("apiserver.image.tag", ""), "an image tag is required"],
    ["empty proxy image tag with e2b on", merge(E2B, at("envdProxy.image.tag", "")), "an image tag is required"],
  ];
  for (const [name, values, message] of cases) {
    test(`${name}: "${message}"`, () => failsWith(values, message));
  }

  test("the full e2b set renders (each failure above is that one value missing)", async () => {
    const r = await template(E2B);
    expect(r.stderr).not.toContain("Error");
    expect(r.code).toBe(0);
  });

  test("an empty proxy tag does not matter while the proxy is not rendered", async () => {
    const r = await template(at("envdProxy.image.tag", ""));
    expect(r.code).toBe(0);
  });

  test("the seed's e2b install command, as operators type it with --set, renders", async () => {
    const r = await helm([
      "template", "sandbox-operator", chartDir, "--namespace", "sandbox-system",
      "--set", "apiserver.e2b.enabled=true",
      "--set", "apiserver.e2b.domain=sandbox.example.com",
      "--set", "apiserver.e2b.apiKeySecret.name=e2b-api-keys",
      "--set", "apiserver.e2b.envdSecret.secretName=e2b-envd-secret",
      "--set", "apiserver.sandboxdToken.secretName=sandboxd-token",
    ]);
    expect(r.stderr).not.toContain("Error");
    expect(r.code).toBe(0);
  });
});

describe("values.schema.json", () => {
  // [what an operator mistypes, the values, text helm's error must contain (the value's path)]
  const mistakes: [string, Values, string][] = [
    ["replicaCount as a word", at("apiserver.replicaCount", "two"), "/apiserver/replicaCount"],
    ["negative replicas", at("envdProxy.replicaCount", -1), "/envdProxy/replicaCount"],
    ["securePort out of range", at("apiserver.securePort", 70000), "/apiserver/securePort"],
    // ("yes" would not do: helm reads YAML 1.1, where an unquoted yes is true.)
    ["e2b.enabled as a string", at("apiserver.e2b.enabled", "1"), "/apiserver/e2b/enabled"],
    ["warmPoolDriver as a string", at("apiserver.warmPoolDriver", "false"), "/apiserver/warmPoolDriver"],
    ["a misspelt key", at("apiserver.replicas", 3), "replicas"],
    ["a misspelt nested key", at("apiserver.e2b.apiKeySecret.nme", "k"), "nme"],
    ["a misspelt top-level key", at("certmanager.enabled", false), "certmanager"],
    ["an unknown pullPolicy", at("apiserver.image.pullPolicy", "Sometimes"), "/apiserver/image/pullPolicy"],
    ["a numeric image tag (use --set-string)", at("apiserver.image.tag", 1.2), "/apiserver/image/tag"],
    ["envdVersion that is not a version", at("apiserver.e2b.envdVersion", "latest"), "/apiserver/e2b/envdVersion"],
    ["zero build parallelism", at("apiserver.e2b.builds.parallel", 0), "/apiserver/e2b/builds/parallel"],
    ["a negative default timeout", at("apiserver.e2b.defaultTimeoutSeconds", -5), "/apiserver/e2b/defaultTimeoutSeconds"],
    ["a domain with a scheme", at("apiserver.e2b.domain", "https://sandbox.example.com"), "/apiserver/e2b/domain"],
    ["an unknown log level", at("envdProxy.logLevel", "verbose"), "/envdProxy/logLevel"],
    ["a Secret name with capitals", at("apiserver.sandboxdToken.secretName", "My_Token"), "/apiserver/sandboxdToken/secretName"],
    ["a caBundle that is not base64", at("certManager.caBundle", "-----BEGIN CERTIFICATE-----"), "/certManager/caBundle"],
    ["a memory request that is not a quantity", at("apiserver.resources.requests.memory", "lots"), "/apiserver/resources/requests/memory"],
    ["tolerations as a map", at("apiserver.tolerations", { key: "x" }), "/apiserver/tolerations"],
    ["an imagePullSecret without a name", at("imagePullSecrets", [{ secret: "regcred" }]), "/imagePullSecrets/0"],
    ["a scrape interval that is not a duration", at("monitoring.serviceMonitor.interval", "30"), "/monitoring/serviceMonitor/interval"],
  ];
  for (const [name, values, path] of mistakes) {
    test(`helm template refuses ${name}, naming ${path}`, async () => {
      const r = await template(values);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("values don't meet the specifications of the schema");
      expect(r.stderr).toContain(path);
    });
  }

  test("values that are right but unusual pass: upper-case log level, quantities as numbers, a port on the domain", async () => {
    const r = await template(
      merge(
        E2B,
        at("apiserver.logLevel", "DEBUG"),
        at("apiserver.resources", { requests: { cpu: 1, memory: "1.5Gi" }, limits: { memory: "2e9" } }),
        at("apiserver.e2b.domain", "sandbox.example.com:8443"),
        at("apiserver.e2b.envdVersion", "0.8.1"),
      ),
    );
    expect(r.stderr).not.toContain("Error");
    expect(r.code).toBe(0);
  });
});
