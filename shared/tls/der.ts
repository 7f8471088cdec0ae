// The few DER (X.690) encodings a self-signed serving certificate needs, and PEM armour. Written out here so a
// daemon that only mints its own serving certificate does not load an X.509 library (one costs ~20 MiB of idle
// RSS in a compiled binary; tests/bench "idle RSS"). Parsing and CA work still use @peculiar/x509 (shared/x509).
import { isIPv4 } from "node:net";

/** Bytes backed by a plain ArrayBuffer (what WebCrypto takes). */
export type Bytes = Uint8Array<ArrayBuffer>;

function length(n: number): number[] {
  if (n < 0x80) return [n];
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return [0x80 | bytes.length, ...bytes];
}

/** Tag-length-value. */
export function tlv(tag: number, ...content: Uint8Array[]): Bytes {
  const body = Buffer.concat(content);
  return new Uint8Array(Buffer.concat([Uint8Array.of(tag, ...length(body.length)), body]));
}

export const sequence = (...items: Uint8Array[]) => tlv(0x30, ...items);
export const set = (...items: Uint8Array[]) => tlv(0x31, ...items);
export const octetString = (b: Uint8Array) => tlv(0x04, b);
export const utf8String = (s: string) => tlv(0x0c, Buffer.from(s, "utf8"));
export const booleanTrue = () => tlv(0x01, Uint8Array.of(0xff));
/** [n] EXPLICIT, constructed context-specific. */
export const explicit = (n: number, inner: Uint8Array) => tlv(0xa0 | n, inner);
/** [n] IMPLICIT primitive, e.g. a GeneralName's dNSName [2] or iPAddress [7]. */
export const implicitPrimitive = (n: number, b: Uint8Array) => tlv(0x80 | n, b);
/** BIT STRING with `unusedBits` padding bits in its last byte. */
export const bitString = (b: Uint8Array, unusedBits = 0) => tlv(0x03, Uint8Array.of(unusedBits), b);

/** A non-negative INTEGER from big-endian magnitude bytes (leading zeros trimmed, a 0x00 pad keeps it positive). */
export function unsignedInteger(magnitude: Uint8Array): Uint8Array {
  let i = 0;
  while (i < magnitude.length - 1 && magnitude[i] === 0) i++;
  const b = magnitude.subarray(i);
  return tlv(0x02, b[0]! >= 0x80 ? Buffer.concat([Uint8Array.of(0), b]) : b);
}

export const smallInteger = (n: number) => unsignedInteger(Uint8Array.of(n));

export function oid(dotted: string): Uint8Array {
  const parts = dotted.split(".").map(Number);
  const out: number[] = [parts[0]! * 40 + parts[1]!];
  for (const p of parts.slice(2)) {
    const chunk: number[] = [p & 0x7f];
    for (let v = Math.floor(p / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift((v & 0x7f) | 0x80);
    out.push(...chunk);
  }
  return tlv(0x06, Uint8Array.from(out));
}

/** RFC 5280 §4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050, both in whole seconds, Zulu. */
export function time(d: Date): Uint8Array {
  const iso = d.toISOString(); // 2026-12-01T02:00:00.000Z
  const digits = iso.slice(0, 19).replace(/[-T:]/g, ""); // 20261201020000
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${digits.slice(2)}Z`)) : tlv(0x18, Buffer.from(`${digits}Z`));
}

/** The 4 or 16 bytes of an IP address literal (IPv6 with `::` and an embedded dotted quad). */
export function ipBytes(ip: string): Uint8Array {
  if (isIPv4(ip)) return Uint8Array.from(ip.split(".").map(Number));
  let text = ip;
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad[1]!.split(".").map(Number);
    text = `${text.slice(0, quad.index)}${((a! << 8) | b!).toString(16)}:${((c! << 8) | d!).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const words = (s: string | undefined) => (s ? s.split(":").map((w) => parseInt(w, 16)) : []);
  const h = words(head);
  const t = words(tail);
  const all = tail === undefined ? h : [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
  if (all.length !== 8 || all.some((w) => !(w >= 0 && w <= 0xffff))) throw new Error(`not an IP address: ${ip}`);
  return Uint8Array.from(all.flatMap((w) => [w >> 8, w & 0xff]));
}

/** WebCrypto's ECDSA signature (r ‖ s, IEEE P1363) as the DER Ecdsa-Sig-Value X.509 carries. */
export function ecdsaSignatureToDer(raw: Uint8Array): Uint8Array {
  const half = raw.length / 2;
  return sequence(unsignedInteger(raw.subarray(0, half)), unsignedInteger(raw.subarray(half)));
}

/** PEM armour: base64 in 64-column lines, ending with a newline. */
export function toPem(der: ArrayBuffer | Uint8Array, label: string): string {
  const b64 = Buffer.from(der instanceof Uint8Array ? der : new Uint8Array(der)).toString("base64");
  return `-----BEGIN ${label}-----\n${b64.replace(/.{64}/g, "$&\n").replace(/\n$/, "")}\n-----END ${label}-----\n`;
}

/** The DER of the first PEM block (any label); throws when there is none. */
export function firstPemBlock(pem: string): Bytes {
  const m = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/.exec(pem);
  if (!m) throw new Error("no PEM block found");
  return new Uint8Array(Buffer.from(m[2]!.replace(/\s+/g, ""), "base64"));
}
