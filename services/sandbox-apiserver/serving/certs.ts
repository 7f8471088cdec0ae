// The serving certificate (docs/serving.md "Secure serving"): --tls-cert-file/--tls-private-key-file when given,
// else a self-signed pair apiserver.crt/apiserver.key in --cert-dir for localhost and the loopback addresses,
// minted once and reused on later starts (as the generic apiserver does).
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { StartupError } from "#shared/config/index.ts";
import { type CertKeyPem, loadKeyPair, selfSignedServingCert } from "#shared/tls/index.ts";

export async function servingCertificate(s: { tlsCertFile?: string; tlsPrivateKeyFile?: string; certDir: string }): Promise<CertKeyPem> {
  if (s.tlsCertFile && s.tlsPrivateKeyFile) {
    try {
      const { certPem, keyPem } = loadKeyPair(s.tlsCertFile, s.tlsPrivateKeyFile);
      return { certPem, keyPem };
    } catch (e) {
      throw new StartupError(`load serving certificate --tls-cert-file=${s.tlsCertFile} --tls-private-key-file=${s.tlsPrivateKeyFile}: ${(e as Error).message}`, {
        flag: "--tls-cert-file",
      });
    }
  }
  const cert = join(s.certDir, "apiserver.crt");
  const key = join(s.certDir, "apiserver.key");
  try {
    if (existsSync(cert) && existsSync(key)) {
      const { certPem, keyPem } = loadKeyPair(cert, key);
      return { certPem, keyPem };
    }
    mkdirSync(s.certDir, { recursive: true, mode: 0o700 });
    const pair = await selfSignedServingCert({ cn: "localhost", dnsNames: ["localhost"], ips: ["127.0.0.1", "::1"] });
    writeFileSync(cert, pair.certPem, { mode: 0o644 });
    writeFileSync(key, pair.keyPem, { mode: 0o600 });
    return pair;
  } catch (e) {
    throw new StartupError(`create self-signed certificates: ${(e as Error).message}`, { flag: "--cert-dir", certDir: s.certDir });
  }
}
