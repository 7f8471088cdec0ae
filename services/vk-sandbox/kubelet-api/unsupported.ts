// Every deliberate "not implemented" of the kubelet API in one place. A microVM sandbox has no container runtime
// behind the Pod: interactive access goes through the sandbox SDK (envd), so the answer says where to go.
//
// Exec, attach and port-forward answer a 501 (a Status body) without upgrading the connection (docs/decisions.md#exec-501): a
// client then fails at once with a readable error instead of negotiating SPDY or WebSocket only to be told no.

export const NOT_IMPLEMENTED = "vk-sandbox: not implemented; use the sandbox SDK for interactive access";

export function notImplemented(status: 500): Response {
  return new Response(`${NOT_IMPLEMENTED}\n`, {
    status,
    headers: { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" },
  });
}

/**
 * The 501 of exec, attach and port-forward, as a Kubernetes `Status`. A `kubectl exec` reaches us through the
 * kube-apiserver, whose stream client decodes a refused upgrade's body as a Status and hands its message to kubectl;
 * a plain-text body decodes to an empty Status there and kubectl prints only "unknown error".
 */
export function streamNotImplemented(): Response {
  const status = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: NOT_IMPLEMENTED,
    reason: "NotImplemented",
    code: 501,
  };
  return new Response(`${JSON.stringify(status)}\n`, {
    status: 501,
    headers: { "Content-Type": "application/json", "X-Content-Type-Options": "nosniff" },
  });
}

export function badRequest(message: string): Response {
  return new Response(`${message}\n`, {
    status: 400,
    headers: { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" },
  });
}
