// A template build with the stock e2b SDK against this control plane, then a sandbox from the built template.
// The SDK reads E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL from the environment (the stack's export lines); the
// stack serves builds with its directory store (README "Turning builds on").
//
//   ./scripts/bun examples/build.ts          (template name: $E2B_BUILD_NAME, default "example-build")
import { NotFoundError, Sandbox, Template, waitForFile } from "e2b";

const name = process.env.E2B_BUILD_NAME ?? "example-build";

// COPY sources are relative to fileContextPath: this directory (examples/).
const template = Template({ fileContextPath: import.meta.dir })
  .fromImage("e2bdev/base") // what Template().fromBaseImage() sends; the stack's alias file maps it to its pool
  .runCmd("echo built by examples/build.ts > /opt/marker", { user: "root" })
  .setWorkdir("/app")
  .copy("build-files/motd.txt", "/app/motd.txt")
  .setEnvs({ GREETING: "hello from the template" })
  .setStartCmd("date > /tmp/started; sleep infinity", waitForFile("/tmp/started"));

const info = await Template.build(template, name, {
  onBuildLogs: (log) => console.log(`build ${log.level}: ${log.message}`),
});
console.log(`built template ${info.templateId} (build ${info.buildId})`);

// The fleet lists a new template one inventory publish after the build (a few seconds at most): until then the
// create answers 404, so retry that briefly.
let sandbox: Sandbox | undefined;
for (let attempt = 0; sandbox === undefined; attempt++) {
  try {
    sandbox = await Sandbox.create(info.templateId);
  } catch (err) {
    const notYet = err instanceof NotFoundError || /^404\b/.test((err as Error).message);
    if (!notYet || attempt >= 30) throw err;
    await Bun.sleep(500);
  }
}
try {
  console.log(`sandbox ${sandbox.sandboxId} from ${info.templateId}`);
  const run = await sandbox.commands.run('cat /opt/marker; cat motd.txt; echo "$GREETING in $(pwd)"; test -f /tmp/started && echo "start command ran"');
  process.stdout.write(run.stdout);
} finally {
  await sandbox.kill();
  console.log("killed");
}
