// Every kubelet API route behind authentication and authorization (docs/decisions.md#kubelet-api-auth): there is no
// bare health probe on this port, so nothing skips them, unknown paths included (a stranger learns nothing, not even
// which paths exist). 401 and 403 bodies are plain text, as the kubelet writes them; the log says why, never with a
// credential in it: a refusal at debug (an anonymous flood must not flood the log), a 403 at info, a review that
// could not be made at warn.
import type { Log } from "#shared/log/index.ts";
import type { KubeletAuthenticator, PeerCert } from "./authn.ts";
import type { KubeletAuthorizer } from "./authz.ts";

export interface GuardOptions {
  authenticator: KubeletAuthenticator;
  authorizer: KubeletAuthorizer;
  /** The routes (createKubeletApp's fetch). */
  fetch(req: Request): Response | Promise<Response>;
  log: Log;
}

const TEXT = { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" };

export function unauthorized(detail: string): Response {
  return new Response(`Unauthorized: ${detail}\n`, { status: 401, headers: TEXT });
}

export function forbidden(text: string): Response {
  return new Response(`${text}\n`, { status: 403, headers: TEXT });
}

export type KubeletHandler = (req: Request, peer: PeerCert | undefined) => Promise<Response>;

export function guardKubeletApi(o: GuardOptions): KubeletHandler {
  return async (req, peer) => {
    const path = new URL(req.url).pathname;
    const who = await o.authenticator.authenticate(req.headers, peer);
    if (!who.ok) {
      const line = { method: req.method, path, reason: who.reason };
      if (who.error) o.log.warn(line, "kubelet API request not authenticated: the token review failed");
      else o.log.debug(line, "kubelet API request not authenticated");
      return unauthorized(who.public);
    }
    const d = await o.authorizer.authorize(who.user, req.method, path);
    if (!d.allowed) {
      const a = d.attributes;
      const line = { method: req.method, path, user: who.user.name, verb: a.verb, subresource: a.subresource, reason: d.reason };
      if (d.error) o.log.warn(line, "kubelet API request forbidden: the access review failed");
      else o.log.info(line, "kubelet API request forbidden");
      const what = `Forbidden (user=${who.user.name}, verb=${a.verb}, resource=${a.resource}, subresource=${a.subresource})`;
      return forbidden(d.error ? `${what}: the authorization review could not be made; try again` : what);
    }
    return o.fetch(req);
  };
}
