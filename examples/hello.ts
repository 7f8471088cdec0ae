// The stock e2b SDK against this control plane: create a sandbox, run a command, write and read a file, kill it.
// Nothing here is specific to this project: the SDK reads E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL (or
// E2B_DOMAIN) from the environment, which `bash scripts/stack.sh` prints as export lines.
//
//   ./scripts/bun examples/hello.ts          (template: $E2B_TEMPLATE, default "base")
//   ./scripts/bun examples/hello.ts --keep   leave the sandbox running (look at it with `./scripts/kubectl get sandboxes -A`)
import { Sandbox } from "e2b";

const keep = process.argv.includes("--keep");
const sandbox = await Sandbox.create(process.env.E2B_TEMPLATE ?? "base");
try {
  console.log(`sandbox ${sandbox.sandboxId}`);
  const run = await sandbox.commands.run("echo hello");
  process.stdout.write(run.stdout); // "hello"
  await sandbox.files.write("greeting.txt", "written by examples/hello.ts");
  console.log(`read back: ${await sandbox.files.read("greeting.txt")}`);
} finally {
  if (keep) {
    console.log(`kept: kill it with Sandbox.kill("${sandbox.sandboxId}") or wait for its timeout`);
  } else {
    await sandbox.kill();
    console.log("killed");
  }
}
