// Where the kubelet API listens: the host of --listen-addr when it names one; else --node-ip when set (the address
// the apiserver is told to dial, so the port is not also open on every other interface); else every interface.
import { splitHostPort } from "#shared/config/index.ts";

export function kubeletBindHost(listenAddr: string, nodeIp: string | undefined): string {
  return splitHostPort(listenAddr).host || nodeIp || "0.0.0.0";
}
