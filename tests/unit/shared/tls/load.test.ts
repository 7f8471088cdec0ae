import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KeyPairError, loadKeyPair, selfSignedServingCert } from "#shared/tls/index.ts";

const dir = mkdtempSync(join(tmpdir(), "tls-load-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe("loadKeyPair", () => {
  test("a matching pair loads and exposes the leaf", async () => {
    const pair = await selfSignedServingCert({ cn: "ok", dnsNames: ["ok"] });
    const loaded = loadKeyPair(write("ok.crt", pair.certPem), write("ok.key", pair.keyPem));
    expect(loaded.certificate.subject).toBe("CN=ok");
    expect(loaded.keyPem).toBe(pair.keyPem);
  });

  test("a key from another pair is refused with an error naming both files", async () => {
    const a = await selfSignedServingCert({ cn: "a" });
    const b = await selfSignedServingCert({ cn: "b" });
    const certPath = write("a.crt", a.certPem);
    const keyPath = write("b.key", b.keyPem);
    let err: unknown;
    try {
      loadKeyPair(certPath, keyPath);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KeyPairError);
    expect((err as Error).message).toContain(certPath);
    expect((err as Error).message).toContain(keyPath);
    expect((err as Error).message).toContain("does not match");
  });

  test("a missing file and a non-PEM file are named in the error", async () => {
    const a = await selfSignedServingCert({ cn: "a" });
    const keyPath = write("a2.key", a.keyPem);
    expect(() => loadKeyPair(join(dir, "absent.crt"), keyPath)).toThrow(/absent\.crt/);
    expect(() => loadKeyPair(write("junk.crt", "junk"), keyPath)).toThrow(/junk\.crt: not a PEM certificate/);
    expect(() => loadKeyPair(write("a2.crt", a.certPem), write("junk.key", "junk"))).toThrow(/junk\.key: not a PEM private key/);
  });
});
