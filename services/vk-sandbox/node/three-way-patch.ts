// A three-way strategic-merge patch over plain JSON, enough for the Node status this daemon owns.
//
// Inputs: `original` (what we applied last time, from an annotation), `modified` (what we want now) and `current`
// (what the apiserver holds, including fields other writers own). The patch sets every field of `modified` that
// differs from `current`, and deletes a field only when it is in `original` but no longer in `modified`. Fields that
// appear in neither `original` nor `modified` belong to someone else and are never touched: that is the whole
// reason for three-way rather than "replace the status".
//
// Lists named in `mergeKeys` merge element-wise by that key (Node conditions and addresses, as the Kubernetes
// strategic-merge schema declares them); their order is pinned with `$setElementOrder/<field>`. Every other list is
// atomic and replaced whole.

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type JsonObject = { [k: string]: Json };

/** Field name → merge key, for lists that merge by key. Applies at any depth. */
export type MergeKeys = Record<string, string>;

export const NODE_MERGE_KEYS: MergeKeys = { conditions: "type", addresses: "type", taints: "key" };

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** Deep structural equality of JSON values; key order does not matter. */
export function jsonEqual(a: Json | undefined, b: Json | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => k in b && jsonEqual(a[k], b[k]));
  }
  return false;
}

/** JSON round trip: Dates become strings, undefined members vanish. */
export function toJson<T>(v: T): Json {
  return JSON.parse(JSON.stringify(v ?? null)) as Json;
}

/** Returns the patch, or an empty object when `current` already matches. */
export function threeWayMergePatch(
  original: JsonObject | undefined,
  modified: JsonObject,
  current: JsonObject | undefined,
  mergeKeys: MergeKeys = NODE_MERGE_KEYS,
): JsonObject {
  const patch: JsonObject = {};
  const cur = current ?? {};
  for (const [k, want] of Object.entries(modified)) {
    const have = cur[k];
    const before = original?.[k];
    const key = mergeKeys[k];
    if (isObject(want) && isObject(have)) {
      const sub = threeWayMergePatch(isObject(before) ? before : undefined, want, have, mergeKeys);
      if (Object.keys(sub).length > 0) patch[k] = sub;
    } else if (key && Array.isArray(want) && Array.isArray(have)) {
      const items = mergeList(key, Array.isArray(before) ? before : undefined, want, have, mergeKeys);
      if (items.length > 0 || !sameOrder(key, want, have)) {
        patch[k] = items;
        patch[`$setElementOrder/${k}`] = want.map((item) => (isObject(item) ? { [key]: item[key] ?? null } : item));
      }
    } else if (!jsonEqual(want, have)) {
      patch[k] = want;
    }
  }
  // Ours last time, not wanted now, still there: delete it. Strategic merge deletes a map member with null.
  for (const k of Object.keys(original ?? {})) {
    if (!(k in modified) && k in cur) patch[k] = null;
  }
  return patch;
}

function keyOf(item: Json, key: string): Json | undefined {
  return isObject(item) ? item[key] : undefined;
}

function findByKey(list: Json[] | undefined, key: string, value: Json | undefined): JsonObject | undefined {
  if (value === undefined || !list) return undefined;
  return list.find((x): x is JsonObject => isObject(x) && jsonEqual(x[key], value));
}

function mergeList(key: string, original: Json[] | undefined, modified: Json[], current: Json[], mk: MergeKeys): Json[] {
  const out: Json[] = [];
  for (const item of modified) {
    if (!isObject(item)) continue;
    const id = item[key];
    const have = findByKey(current, key, id);
    if (!have) {
      out.push(item);
      continue;
    }
    const sub = threeWayMergePatch(findByKey(original, key, id), item, have, mk);
    if (Object.keys(sub).length > 0) out.push({ [key]: id ?? null, ...sub });
  }
  for (const item of original ?? []) {
    const id = keyOf(item, key);
    if (id === undefined || findByKey(modified, key, id)) continue;
    if (findByKey(current, key, id)) out.push({ [key]: id, $patch: "delete" });
  }
  return out;
}

// Our elements must appear in our order; elements others added may sit anywhere around them.
function sameOrder(key: string, modified: Json[], current: Json[]): boolean {
  const ours = new Set(modified.map((x) => JSON.stringify(keyOf(x, key) ?? null)));
  const seen = current.map((x) => JSON.stringify(keyOf(x, key) ?? null)).filter((id) => ours.has(id));
  const want = modified.map((x) => JSON.stringify(keyOf(x, key) ?? null));
  return seen.length === want.length && seen.every((id, i) => id === want[i]);
}
