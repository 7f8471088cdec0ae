// shared/sandboxd/urls.ts: signed envd file URLs and the node's relay URLs (no node needed).
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { SandboxdClient, fileSignature, signedFileUrl } from "#shared/sandboxd/client.ts";

describe("data-plane URLs", () => {
  test("a signed file URL carries the SDK's v1 signature without padding, and the expiry when given", () => {
    const o = { path: "/home/user/a.txt", operation: "read" as const, user: "user", accessToken: "t0k", expiresAtSeconds: 1_800_000_000 };
    const digest = createHash("sha256").update("/home/user/a.txt:read:user:t0k:1800000000").digest("base64");
    expect(fileSignature(o)).toBe(`v1_${digest.replace(/=+$/, "")}`);
    expect(fileSignature(o)).not.toContain("=");
    const u = new URL(signedFileUrl("https://49983-sb-0123456789abcdef.example.com/", o));
    expect(u.pathname).toBe("/files");
    expect(u.searchParams.get("path")).toBe("/home/user/a.txt");
    expect(u.searchParams.get("username")).toBe("user");
    expect(u.searchParams.get("signature")).toBe(fileSignature(o));
    expect(u.searchParams.get("signature_expiration")).toBe("1800000000");
    expect(new URL(signedFileUrl("https://e", { ...o, expiresAtSeconds: undefined })).searchParams.has("signature_expiration")).toBe(false);
  });

  test("relay URLs are built on the node's base URL and reject a bad port", () => {
    const c = new SandboxdClient({ baseUrl: "http://10.0.0.5:7777/" });
    expect(c.portRelayUrl("sb_0123456789abcdef", 8080)).toBe("http://10.0.0.5:7777/v1/sandboxes/sb_0123456789abcdef/ports/8080");
    expect(c.agentUrl("sb_0123456789abcdef")).toBe("http://10.0.0.5:7777/v1/sandboxes/sb_0123456789abcdef/agent");
    expect(() => c.portRelayUrl("sb_0123456789abcdef", 70000)).toThrow(RangeError);
  });
});
