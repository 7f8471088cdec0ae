// Run inside the test's mount namespace (scheme.test.ts) with only E2B_DOMAIN, E2B_API_KEY and the test CA in the
// environment: the stock JS SDK finds https://api.<domain> and https://<port>-<id>.<domain> by itself. Prints one
// JSON line of what each call answered.
import { Sandbox } from "e2b";

const out: Record<string, unknown> = { apiUrl: `https://api.${process.env.E2B_DOMAIN}` };
const sbx = await Sandbox.create("base");
try {
  out.created = sbx.sandboxId;
  out.run = (await sbx.commands.run("echo from-js")).stdout;
  await sbx.files.write("scheme.txt", "written over https");
  out.read = await sbx.files.read("scheme.txt");
  out.host = sbx.getHost(49983);
  out.listed = (await Sandbox.list().nextItems()).some((x) => x.sandboxId === sbx.sandboxId);
  out.info = (await sbx.getInfo()).state;
} finally {
  out.killed = await sbx.kill();
}
console.log(JSON.stringify(out));
