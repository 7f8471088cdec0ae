// The proxy choice for the apiserver, as client-go makes it (Go's http.ProxyFromEnvironment).
import { describe, expect, test } from "bun:test";
import { proxyForUrl } from "#shared/kube/proxy.ts";

const P = "http://proxy:3128";

describe("proxyForUrl", () => {
  test.each([
    ["https://kube.example.com:6443", { HTTPS_PROXY: P }, P],
    ["https://kube.example.com:6443", { https_proxy: P }, P],
    ["https://kube.example.com:6443", { HTTPS_PROXY: "proxy:3128" }, P], // a bare host:port reads as http://
    ["https://kube.example.com:6443", { HTTP_PROXY: P }, undefined], // the http proxy is not for https
    ["http://kube.example.com:8080", { HTTP_PROXY: P }, P],
    ["https://127.0.0.1:6443", { HTTPS_PROXY: P }, undefined], // loopback is never proxied
    ["https://[::1]:6443", { HTTPS_PROXY: P }, undefined],
    ["https://localhost:6443", { HTTPS_PROXY: P }, undefined],
    ["https://kube.example.com:6443", { HTTPS_PROXY: P, NO_PROXY: "*" }, undefined],
    ["https://kube.example.com:6443", { HTTPS_PROXY: P, NO_PROXY: "example.com" }, undefined], // name and subdomains
    ["https://example.com:6443", { HTTPS_PROXY: P, NO_PROXY: "example.com" }, undefined],
    ["https://example.com:6443", { HTTPS_PROXY: P, NO_PROXY: ".example.com" }, P], // leading dot: subdomains only
    ["https://kube.example.com:6443", { HTTPS_PROXY: P, NO_PROXY: ".example.com" }, undefined],
    ["https://notexample.com:6443", { HTTPS_PROXY: P, NO_PROXY: "example.com" }, P],
    ["https://kube.example.com:6443", { HTTPS_PROXY: P, NO_PROXY: "kube.example.com:443" }, P], // other port
    ["https://kube.example.com:6443", { HTTPS_PROXY: P, NO_PROXY: "kube.example.com:6443" }, undefined],
    ["https://10.1.2.3:6443", { HTTPS_PROXY: P, NO_PROXY: "10.0.0.0/8" }, undefined],
    ["https://11.1.2.3:6443", { HTTPS_PROXY: P, NO_PROXY: "10.0.0.0/8" }, P],
    ["https://10.1.2.3:6443", { HTTPS_PROXY: P, no_proxy: " 10.1.2.3 , other" }, undefined],
    ["https://kube.example.com:6443", {}, undefined],
  ] as const)("%s with %j -> %s", (url, env, want) => {
    expect(proxyForUrl(url, env)).toBe(want);
  });
});
