// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// The user an envd request acts as: the SDK names it in `Authorization: Basic base64("<user>:")` (Connect
// calls) or the `username` query parameter (/files). Absent or unreadable: undefined (the sandbox's default user).
export function basicUser(header: string | null | undefined): string | undefined {
  const m = header?.match(/^Basic\s+(\S+)$/i);
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, "base64").toString("utf8");
  const name = text.split(":")[0] ?? "";
  return /^[a-z_][a-z0-9_.-]{0,31}\$?$/i.test(name) ? name : undefined;
}
