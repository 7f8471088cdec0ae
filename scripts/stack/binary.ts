// How the stack runs a binary: from source through the running bun (the default), or, with STACK_BINARIES=dist,
// the compiled dist/<name> that `bun run build` made (the benchmarks measure both forms).
import { existsSync } from "node:fs";
import { join } from "node:path";

export function binary(root: string, name: string): string[] {
  if (process.env.STACK_BINARIES === "dist") {
    const compiled = join(root, "dist", name);
    if (!existsSync(compiled)) throw new Error(`STACK_BINARIES=dist but ${compiled} does not exist: run \`bun run build\` first`);
    return [compiled];
  }
  return [process.execPath, join(root, "services", name, "main.ts")];
}
