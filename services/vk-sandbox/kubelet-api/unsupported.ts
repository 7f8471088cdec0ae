// Every deliberate "not implemented" of the kubelet API in one place. A microVM sandbox has no container runtime
// behind the Pod: interactive access goes through the sandbox SDK (envd), so the answer says where to go.
//
// Exec, attach and port-forward answer a plain 501 without upgrading the connection (docs/decisions.md#exec-501): a
// client then fails at once with a readable error instead of negotiating SPDY or WebSocket only to be told no.

export const NOT_IMPLEMENTED = "vk-sandbox: not implemented; use the sandbox SDK for interactive access";

export function notImplemented(status: 500 | 501): Response {
  return new Response(`${NOT_IMPLEMENTED}\n`, {
    status,
    headers: { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" },
  });
}

export function badRequest(message: string): Response {
  return new Response(`${message}\n`, {
    status: 400,
    headers: { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" },
  });
}
