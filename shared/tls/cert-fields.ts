// What node:crypto's X509Certificate does not expose, read straight from a certificate's DER: the subject's
// attributes one by one (CN is the user, O the groups, as Kubernetes reads them) and the basic constraints' path
// length. With them a server verifies client certificate chains with node:crypto alone, not an X.509 library
// (~6 MiB of idle RSS in sandbox-apiserver; docs/performance.md "Idle memory"). Attributes come out in
// certificate order, every RDN flattened, as Go's pkix.Name does.

/** One element: its tag, where its content starts and ends. */
interface Tlv {
  tag: number;
  start: number;
  end: number;
}

function read(der: Uint8Array, at: number, limit: number): Tlv {
  if (at + 2 > limit) throw new Error("certificate DER: truncated element");
  const tag = der[at]!;
  let len = der[at + 1]!;
  let start = at + 2;
  if (len >= 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || start + n > limit) throw new Error("certificate DER: bad length");
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + der[start + i]!;
    start += n;
  }
  if (start + len > limit) throw new Error("certificate DER: element runs past its parent");
  return { tag, start, end: start + len };
}

/** The children of a constructed element. */
function children(der: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = parent.start; at < parent.end; ) {
    const t = read(der, at, parent.end);
    out.push(t);
    at = t.end;
  }
  return out;
}

function decodeOid(b: Uint8Array): string {
  const parts: number[] = [];
  let v = 0;
  for (const byte of b) {
    v = v * 128 + (byte & 0x7f);
    if (byte < 0x80) {
      if (parts.length === 0) parts.push(v < 80 ? Math.floor(v / 40) : 2, v < 80 ? v % 40 : v - 80);
      else parts.push(v);
      v = 0;
    }
  }
  return parts.join(".");
}

function decodeString(tag: number, b: Uint8Array): string {
  switch (tag) {
    case 0x1e: // BMPString: UTF-16BE
      return Buffer.from(b).swap16().toString("utf16le");
    case 0x1c: // UniversalString: UTF-32BE
      return String.fromCodePoint(...Array.from({ length: b.length >> 2 }, (_, i) => new DataView(b.buffer, b.byteOffset + 4 * i, 4).getUint32(0)));
    case 0x14: // TeletexString, read as Latin-1 as Go does
      return Buffer.from(b).toString("latin1");
    default: // UTF8String, PrintableString, IA5String, ...
      return Buffer.from(b).toString("utf8");
  }
}

const NAMES: Record<string, string> = { "2.5.4.3": "CN", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST" };

export interface CertFields {
  /** The subject's attributes, as [short name or dotted OID, value], in certificate order. */
  subject: Array<[string, string]>;
  /** basicConstraints pathLenConstraint, when the certificate has one. */
  pathLength: number | undefined;
}

const BASIC_CONSTRAINTS = "2.5.29.19";

/** The fields of a DER certificate node:crypto does not give. Throws on malformed DER. */
export function certFields(der: Uint8Array): CertFields {
  const cert = read(der, 0, der.length);
  const tbs = children(der, cert)[0];
  if (cert.tag !== 0x30 || !tbs || tbs.tag !== 0x30) throw new Error("certificate DER: not a certificate");
  const fields = children(der, tbs);
  // [0] version (optional), serial, signature algorithm, issuer, validity, subject, subjectPublicKeyInfo, ..., [3] extensions
  const first = fields[0]?.tag === 0xa0 ? 1 : 0;
  const subject = fields[first + 4];
  if (!subject || subject.tag !== 0x30) throw new Error("certificate DER: no subject");
  const attrs: Array<[string, string]> = [];
  for (const rdn of children(der, subject)) {
    for (const atv of children(der, rdn)) {
      const [type, value] = children(der, atv);
      if (!type || !value || type.tag !== 0x06) throw new Error("certificate DER: bad subject attribute");
      const id = decodeOid(der.subarray(type.start, type.end));
      attrs.push([NAMES[id] ?? id, decodeString(value.tag, der.subarray(value.start, value.end))]);
    }
  }
  let pathLength: number | undefined;
  const extensions = fields.slice(first + 6).find((f) => f.tag === 0xa3);
  const list = extensions ? children(der, extensions)[0] : undefined;
  for (const ext of list ? children(der, list) : []) {
    const [id, ...rest] = children(der, ext);
    if (!id || id.tag !== 0x06 || decodeOid(der.subarray(id.start, id.end)) !== BASIC_CONSTRAINTS) continue;
    const value = rest.find((r) => r.tag === 0x04);
    const seq = value ? read(der, value.start, value.end) : undefined;
    const len = seq ? children(der, seq).find((c) => c.tag === 0x02) : undefined;
    if (len) pathLength = der.subarray(len.start, len.end).reduce((n, b) => n * 256 + b, 0);
  }
  return { subject: attrs, pathLength };
}
