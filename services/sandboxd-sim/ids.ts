// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Ids and tokens in sandboxd's real formats (`sb_` + 16 hex, 32-hex tokens, `ck_` + 16 hex, sha256 digests).
// With a seed the sequence is deterministic (a SHA-256 counter stream), so a test can predict every id; without one
// it draws from crypto.getRandomValues.
import { createHash, randomBytes } from "node:crypto";

export interface IdSource {
  sandboxId(): string;
  token(): string;
  checkpointId(): string;
  digest(): string;
  /** A uniform float in [0, 1) for choices that must also be reproducible (power-of-two redirect pick). */
  random(): number;
}

export function createIdSource(seed?: string | number): IdSource {
  let counter = 0;
  const hex = (bytes: number): string => {
    if (seed === undefined) return randomBytes(bytes).toString("hex");
    let out = "";
    while (out.length < bytes * 2) out += createHash("sha256").update(`${seed}:${counter++}`).digest("hex");
    return out.slice(0, bytes * 2);
  };
  return {
    sandboxId: () => `sb_${hex(8)}`,
    token: () => hex(16),
    checkpointId: () => `ck_${hex(8)}`,
    digest: () => `sha256:${hex(32)}`,
    random: () => parseInt(hex(4), 16) / 2 ** 32,
  };
}
