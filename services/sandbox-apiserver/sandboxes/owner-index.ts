// The owning-node index (docs/api.md "Resolution"): `name/<ns>/<name>` and `claim/<ns>/<id>` → the node last seen
// holding it. Filled on a successful claim and on every successful resolution, so a Get right after a Create on
// this replica asks the right node first. Bounded by two generations: when the current map reaches `limit` keys it
// becomes the previous one and a fresh map starts (at most 2 × limit keys); a hit in the previous generation is
// copied forward, so what is still used survives the turnover.
export const OWNER_INDEX_GENERATION = 8192;

export class OwnerIndex {
  private current = new Map<string, string>();
  private previous = new Map<string, string>();

  constructor(private readonly limit = OWNER_INDEX_GENERATION) {}

  static nameKey(namespace: string, name: string): string {
    return `name/${namespace}/${name}`;
  }

  static claimKey(namespace: string, id: string): string {
    return `claim/${namespace}/${id}`;
  }

  get(key: string): string | undefined {
    const hit = this.current.get(key);
    if (hit !== undefined) return hit;
    const old = this.previous.get(key);
    if (old !== undefined) this.set(key, old);
    return old;
  }

  set(key: string, node: string): void {
    if (!this.current.has(key) && this.current.size >= this.limit) {
      this.previous = this.current;
      this.current = new Map();
    }
    this.current.set(key, node);
  }

  get size(): number {
    return this.current.size + this.previous.size;
  }
}
