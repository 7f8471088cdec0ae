import tls from "node:tls";
import { createCA, issueCertificate } from "#shared/tls/index.ts";
import { x509 } from "#shared/tls/index.ts";
import { importSigningKey, generateKeyPair, privateKeyToPem, randomSerialHex, SIGNING_ALGORITHM } from "./shared/tls/keys.ts";
const root = await createCA("root");
// intermediate by hand
const keys = await generateKeyPair();
const rootCert = new x509.X509Certificate(root.certPem);
const inter = await x509.X509CertificateGenerator.create({ serialNumber: randomSerialHex(), subject: "CN=inter", issuer: rootCert.subject, notBefore: new Date(Date.now()-3600e3), notAfter: new Date(Date.now()+3600e3), signingAlgorithm: SIGNING_ALGORITHM, publicKey: keys.publicKey, signingKey: await importSigningKey(root.keyPem), extensions: [new x509.BasicConstraintsExtension(true, 0, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)] });
const interCA = { subject: "CN=inter", certPem: inter.toString("pem") + "\n", keyPem: await privateKeyToPem(keys.privateKey) };
const leaf = await issueCertificate({ ca: interCA, cn: "alice", usages: "client" });
const srv = await issueCertificate({ ca: root, cn: "localhost", ips: ["127.0.0.1"], usages: "server" });
const s = tls.createServer({ cert: srv.certPem, key: srv.keyPem, requestCert: true, rejectUnauthorized: false }, (sock) => {
  let c: any = sock.getPeerCertificate(true);
  const seen = new Set();
  while (c && c.raw && !seen.has(c.fingerprint256)) { seen.add(c.fingerprint256); console.log("peer chain:", c.subject?.CN, "issuer", c.issuer?.CN); c = c.issuerCertificate; }
  console.log("x509 chain via getPeerX509Certificate?", typeof (sock as any).getPeerX509Certificate);
  sock.end("hi");
});
await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
const port = (s.address() as any).port;
await new Promise<void>((resolve) => { const c = tls.connect({ port, host: "127.0.0.1", ca: root.certPem, cert: leaf.certPem + interCA.certPem, key: leaf.keyPem }, () => {}); c.on("data", () => { c.end(); resolve(); }); c.on("error", (e) => { console.log("err", e.message); resolve(); }); });
console.log("--- fetch");
const s2 = Bun.serve({ port: 0, fetch: () => new Response("x") });
s.close(); s2.stop();
process.exit(0);
