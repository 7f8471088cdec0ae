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
  // A public sandbox's user port at https://<port>-<id>.<domain>, as a browser opens it: no token at all.
  const port = 20000 + Math.floor(Math.random() * 20000);
  await sbx.commands.run(`python3 -m http.server ${port} --bind 127.0.0.1`, { background: true, timeoutMs: 0 });
  await sbx.commands.run(`until python3 -c 'import socket; socket.create_connection(("127.0.0.1", ${port}), 1)' 2>/dev/null; do sleep 0.1; done`, { timeoutMs: 20_000 });
  // Without the envd token the proxy finds a sandbox only once its fleet view has it (the full stack: the next
  // NodeInventory publish; issue 20 part 2), so a 502 is retried for up to 15 s.
  const deadline = Date.now() + 15_000;
  let status = 0;
  do {
    status = (await fetch(`https://${sbx.getHost(port)}/`)).status;
  } while (status === 502 && Date.now() < deadline && (await Bun.sleep(200), true));
  out.publicPort = status;
} finally {
  out.killed = await sbx.kill();
}
console.log(JSON.stringify(out));
