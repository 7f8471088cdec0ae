// The kubelet API's serving pair (§8.1). HTTPS only, so a certificate always exists: the given pair when both
// files are there, else one minted in memory. Self-signing keeps every node's surface uniform without borrowing a
// co-located vk-cocoon's certificate; the apiserver dials these routes without verifying the serving certificate.
// Who may call them is decided per request (authn.ts, authz.ts), not by this certificate.
import { statSync } from "node:fs";
import { isIP } from "node:net";
import { type CertKeyPem, loadKeyPair, selfSignedServingCert } from "#shared/tls/index.ts";

export interface KubeletTlsInput {
  tlsCert?: string;
  tlsKey?: string;
  nodeName: string;
  nodeIp?: string;
}

export interface KubeletTlsPair extends CertKeyPem {
  source: "files" | "self-signed";
}

const isRegularFile = (p: string | undefined): p is string => {
  if (!p) return false;
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
};

/** The SANs of the self-signed certificate: node name (IP when it parses as one), node IP, 127.0.0.1. */
export function selfSignedSans(nodeName: string, nodeIp?: string): { dnsNames: string[]; ips: string[] } {
  const dnsNames: string[] = [];
  const ips: string[] = [];
  for (const v of [nodeName, nodeIp, "127.0.0.1"]) {
    if (!v) continue;
    const list = isIP(v) ? ips : dnsNames;
    if (!list.includes(v)) list.push(v);
  }
  return { dnsNames, ips };
}

/**
 * Loads --tls-cert/--tls-key when both name regular files (a pair that does not load or match throws: fatal at
 * startup); otherwise self-signs ECDSA P-256, CN vk-sandbox.
 */
export async function kubeletTlsPair(input: KubeletTlsInput): Promise<KubeletTlsPair> {
  if (isRegularFile(input.tlsCert) && isRegularFile(input.tlsKey)) {
    const { certPem, keyPem } = loadKeyPair(input.tlsCert, input.tlsKey);
    return { certPem, keyPem, source: "files" };
  }
  const pair = await selfSignedServingCert({ cn: "vk-sandbox", ...selfSignedSans(input.nodeName, input.nodeIp) });
  return { ...pair, source: "self-signed" };
}
