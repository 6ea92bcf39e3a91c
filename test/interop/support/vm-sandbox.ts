// A VM in a sandbox for the VM start suite (vm-start.test.ts): a process holding a private mount,
// network and UTS namespace (`unshare --mount --net --uts`), in which the VM's files from
// Istio's `workload entry configure` are installed at the paths Istio's VM instructions and
// package use, and Istio's istio-start.sh is run unchanged as systemd's istio.service would run
// it (working directory /, a bare environment). The host is untouched: /etc, /usr/local/bin and
// /var are overlays whose upper layers live on a tmpfs private to the namespace, /run is a fresh
// tmpfs, and the network is the namespace's own (lo, and a veth eth0 holding the VM's address,
// whose peer is in a second network namespace, the cluster's, holding istiod's address).
//
// What the sandbox lacks and is provided inside it (docs/interop.md says so too):
// - `sudo`: istio-start.sh ends in `exec sudo -E -u istio-proxy -s /bin/bash -c ...`; the
//   machine has no sudo, so /usr/local/bin/sudo is a stand-in that runs the command as that
//   user with setpriv (environment kept, as -E asks; USER, LOGNAME and HOME set as sudo sets them).
// - the istio-proxy user and /var/log/istio: created as Istio's package does (useradd --system,
//   home /var/lib/istio) in the overlay's /etc/passwd.
// - /etc/hosts: the overlay shows the image's file, not the container's bind mount; it is
//   rewritten with localhost, then the VM's `hosts` is appended as the VM instructions say.

import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const VM_IP = "10.10.10.10";
export const ISTIOD_IP = "10.10.10.11";
export const VM_HOSTNAME = "vm-1";

export interface Sandbox {
  /** The namespace holder's pid (nsenter's target). */
  pid: number;
  /** Host-side scratch directory (records of the Envoy stand-in: world-writable). */
  dir: string;
  /** Run a command inside the namespaces (mount, net, uts), cwd /. */
  exec(cmd: string[], env?: Record<string, string>): { code: number; out: string; err: string };
  /** Same, failing with the command's output on a non-zero exit. */
  must(cmd: string[]): string;
  /** Spawn a long-running command inside the namespaces. */
  spawn(cmd: string[], env: Record<string, string>): ReturnType<typeof Bun.spawn>;
  /** Spawn a command in the cluster's network namespace (the host's filesystem). */
  spawnInCluster(cmd: string[], env: Record<string, string>): ReturnType<typeof Bun.spawn>;
  /** A file as the namespace sees it (through /proc/<pid>/root). */
  read(path: string): string | undefined;
  destroy(): Promise<void>;
}

const SUDO_STANDIN = `#!/bin/sh
# Stand-in for sudo (the test machine has none), enough for istio-start.sh's
# "sudo -E -u USER -s SHELL -c CMD": the command runs as USER with the environment kept.
user=root
while [ $# -gt 0 ]; do
  case "$1" in
    -E|-s) shift ;;
    -u) user=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "sudo stand-in: unsupported option $1" >&2; exit 1 ;;
    *) break ;;
  esac
done
home=$(getent passwd "$user" | cut -d: -f6)
exec setpriv --reuid "$user" --regid "$(id -g "$user")" --init-groups env USER="$user" LOGNAME="$user" HOME="$home" SUDO_USER=root SUDO_UID=0 SUDO_GID=0 "$@"
`;

function run(cmd: string[], env?: Record<string, string>): { code: number; out: string; err: string } {
  const r = Bun.spawnSync(cmd, { env: env ?? { PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin" }, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, out: r.stdout.toString(), err: r.stderr.toString() };
}

export const SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** `unshare <flags> sleep`: a process holding new namespaces, once it is in them. */
async function holdNamespaces(flags: string[]): Promise<ReturnType<typeof Bun.spawn>> {
  const holder = Bun.spawn(["unshare", ...flags, "sleep", "3600"], { stdout: "ignore", stderr: "pipe" });
  const mine = run(["readlink", "/proc/self/ns/net"]).out.trim();
  for (let i = 0; i < 400; i++) {
    const theirs = run(["readlink", `/proc/${holder.pid}/ns/net`]).out.trim();
    if (theirs && theirs !== mine && run(["readlink", `/proc/${holder.pid}/exe`]).out.includes("sleep")) return holder;
    if (holder.exitCode !== null) throw new Error(`unshare ${flags.join(" ")} exited ${holder.exitCode}`);
    await Bun.sleep(25);
  }
  holder.kill("SIGKILL");
  throw new Error(`unshare ${flags.join(" ")}: not in its namespaces after 10 s`);
}

/** Creates the namespaces and the private filesystem layers; nothing is installed yet. */
export async function createSandbox(label: string): Promise<Sandbox> {
  const dir = mkdtempSync(join(tmpdir(), `vm-${label}-`));
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, "record"), { mode: 0o777 });
  chmodSync(join(dir, "record"), 0o777);
  mkdirSync(join(dir, "layers"));
  const holder = await holdNamespaces(["--mount", "--net", "--uts", "--propagation", "private"]);
  // The cluster: a network namespace of its own for istiod, reached over the VM's eth0 (an
  // istiod on one of the VM's own addresses would be reached over lo, which Istio's rules send
  // to Envoy's inbound port, as traffic to itself).
  const cluster = await holdNamespaces(["--net"]);
  const pid = holder.pid;
  // cd / after entering: nsenter's --wd=/ would keep the host's root directory (opened before
  // setns), under which the namespace's overlays do not exist.
  const ns = ["nsenter", "-t", String(pid), "-m", "-n", "-u", "--", "sh", "-c", 'cd / && exec "$@"', "sh"];
  const exec = (cmd: string[], env?: Record<string, string>) => run([...ns, ...cmd], env ?? { PATH: SYSTEMD_PATH });
  const must = (cmd: string[]) => {
    const r = exec(cmd);
    if (r.code !== 0) throw new Error(`${cmd.join(" ")} in the VM sandbox exited ${r.code}: ${r.err || r.out}`);
    return r.out;
  };
  const layers = join(dir, "layers");
  const script = [
    "set -e",
    `mount -t tmpfs tmpfs ${layers}`,
    ...["etc", "usr/local/bin", "var"].flatMap((d) => {
      const k = d.replaceAll("/", "_");
      return [
        `mkdir -p ${layers}/${k}/u ${layers}/${k}/w`,
        `mount -t overlay overlay -o lowerdir=/${d},upperdir=${layers}/${k}/u,workdir=${layers}/${k}/w /${d}`,
      ];
    }),
    "mount -t tmpfs -o mode=0755 tmpfs /run",
    "ip link set lo up",
    `ip link add eth0 type veth peer name eth0 netns ${cluster.pid}`,
    `ip addr add ${VM_IP}/24 dev eth0`,
    "ip link set eth0 up",
    `hostname ${VM_HOSTNAME}`,
  ].join("\n");
  must(["bash", "-c", script]);
  const inCluster = ["nsenter", "-t", String(cluster.pid), "-n", "--"];
  const c = run([...inCluster, "bash", "-c", `set -e; ip link set lo up; ip addr add ${ISTIOD_IP}/24 dev eth0; ip link set eth0 up`]);
  if (c.code !== 0) throw new Error(`cluster namespace setup exited ${c.code}: ${c.err}`);
  return {
    pid,
    dir,
    exec,
    must,
    spawn: (cmd, env) => Bun.spawn([...ns, ...cmd], { env, stdout: "pipe", stderr: "pipe" }),
    spawnInCluster: (cmd, env) => Bun.spawn([...inCluster, ...cmd], { env, stdout: "pipe", stderr: "pipe" }),
    read: (path) => {
      const p = `/proc/${pid}/root${path}`;
      return existsSync(p) ? readFileSync(p, "utf8") : undefined;
    },
    destroy: async () => {
      for (const h of [holder, cluster]) {
        h.kill("SIGKILL");
        await h.exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface VmInstall {
  /** The binary installed as /usr/local/bin/pilot-agent. */
  agent: string;
  /** Folder with cluster.env, mesh.yaml, hosts, root-cert.pem, istio-token. */
  vmFiles: string;
  /** Istio's tools/packaging/common folder (istio-start.sh, envoy_bootstrap.json, sidecar.env). */
  packaging: string;
  /** The /usr/local/bin/envoy script. */
  envoy: string;
}

/** Installs the agent as Istio's package does and the VM's files as Istio's VM instructions do. */
export function installVm(sb: Sandbox, o: VmInstall): void {
  const stage = join(sb.dir, "stage");
  mkdirSync(stage);
  writeFileSync(join(stage, "sudo"), SUDO_STANDIN);
  writeFileSync(join(stage, "envoy"), o.envoy);
  const f = (name: string) => join(o.vmFiles, name);
  const p = (name: string) => join(o.packaging, name);
  const script = [
    "set -e",
    // The package: binaries, start script, bootstrap template, sidecar.env, the istio-proxy user.
    `install -m 0755 ${o.agent} /usr/local/bin/pilot-agent`,
    `install -m 0755 ${join(stage, "envoy")} /usr/local/bin/envoy`,
    `install -m 0755 ${p("istio-start.sh")} /usr/local/bin/istio-start.sh`,
    `install -m 0755 ${join(stage, "sudo")} /usr/local/bin/sudo`,
    "mkdir -p /var/lib/istio/envoy /var/log/istio",
    `install -m 0644 ${p("envoy_bootstrap.json")} /var/lib/istio/envoy/envoy_bootstrap_tmpl.json`,
    `install -m 0644 ${p("sidecar.env")} /var/lib/istio/envoy/sidecar.env`,
    "groupadd --system istio-proxy",
    "useradd --system --gid istio-proxy --home-dir /var/lib/istio --no-create-home --shell /bin/sh istio-proxy",
    "chown -R istio-proxy:istio-proxy /var/lib/istio /var/log/istio",
    // Istio's VM instructions ("Configure the virtual machine").
    "mkdir -p /etc/certs",
    `cp ${f("root-cert.pem")} /etc/certs/root-cert.pem`,
    "mkdir -p /var/run/secrets/tokens",
    `cp ${f("istio-token")} /var/run/secrets/tokens/istio-token`,
    `cp ${f("cluster.env")} /var/lib/istio/envoy/cluster.env`,
    "mkdir -p /etc/istio/config",
    `cp ${f("mesh.yaml")} /etc/istio/config/mesh`,
    "printf '127.0.0.1 localhost\\n::1 localhost ip6-localhost\\n' > /etc/hosts",
    `cat ${f("hosts")} >> /etc/hosts`,
    "mkdir -p /etc/istio/proxy",
    "chown -R istio-proxy /var/lib/istio /etc/certs /etc/istio/proxy /etc/istio/config /var/run/secrets /etc/certs/root-cert.pem",
  ].join("\n");
  sb.must(["bash", "-c", script]);
}
