// `agent doctor`'s checks that need root: the capture rules (compared, in a network namespace, with
// what `agent iptables` applied for the same cluster.env) and the hosts entry for istiod (a private
// /etc/hosts bind-mounted in a mount namespace, read by the system resolver too).

import { afterEach, expect, test } from "bun:test";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { createPair, must, sh, type Pair } from "../iptables/netns.ts";
import { CLUSTER_ENV, line, startVm, type Vm } from "./vm.ts";

const vms: Vm[] = [];
const pairs: Pair[] = [];
afterEach(() => {
  for (const v of vms.splice(0)) v.close();
  for (const p of pairs.splice(0)) p.destroy();
});

/** cluster.env as the environment istio-start.sh gives `pilot-agent istio-iptables` (it sources the file). */
const clusterVars = Object.fromEntries(CLUSTER_ENV.split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 2, -1)]));

describeRequiring(
  { root: true, tools: ["ip", "iptables", "iptables-save", "openssl"], apt: ["iproute2", "iptables", "openssl"] },
  "agent doctor: capture rules in a network namespace",
  () => {
    test("rules applied by agent iptables match; one deleted is named; none at all is a failure", async () => {
      const v = await startVm();
      vms.push(v);
      v.write("etc/istio/config/mesh", `defaultConfig:\n  binaryPath: ${v.path("usr/local/bin/envoy")}\n  statusPort: 15020\n`);
      const pair = createPair(61);
      pairs.push(pair);
      const ipt = sh(["ip", "netns", "exec", pair.pod, v.box.bin, "iptables"], { env: { ...clusterVars, PATH: "/usr/sbin:/usr/bin:/sbin:/bin" } });
      expect(ipt.code).toBe(0);
      const inNs = ["ip", "netns", "exec", pair.pod];

      let r = await v.doctor([], {}, inNs);
      expect(line(r.out, "ok", "capture", "and match this configuration")).toBeDefined();

      must([...inNs, "iptables", "-t", "nat", "-D", "ISTIO_INBOUND", "-p", "tcp", "--dport", "15090", "-j", "RETURN"]);
      r = await v.doctor([], {}, inNs);
      expect(line(r.out, "FAIL", "capture", "nat/ISTIO_INBOUND: missing --dport 15090 -p tcp -j RETURN")).toBeDefined();
      expect(r.out).toContain("fix: run `agent iptables --cleanup-only` then `agent iptables` with this environment");
      expect(r.code).toBe(1);

      expect(sh([...inNs, v.box.bin, "iptables", "--cleanup-only"], { env: { ...clusterVars, PATH: "/usr/sbin:/usr/bin:/sbin:/bin" } }).code).toBe(0);
      r = await v.doctor([], {}, inNs);
      expect(line(r.out, "FAIL", "capture", "no Istio capture rules (no ISTIO_* chain in iptables-save): traffic bypasses the proxy")).toBeDefined();
      expect(r.code).toBe(1);
    }, 60_000);
  },
);

describeRequiring({ root: true, tools: ["unshare", "mount", "openssl"], apt: ["util-linux", "mount", "openssl"] }, "agent doctor: hosts entries", () => {
  test("istiod's name in /etc/hosts: resolved, and TLS verified by that name; without the line: named with the fix", async () => {
    const v = await startVm();
    vms.push(v);
    const hosts = v.path("hosts-with-istiod");
    v.write("hosts-with-istiod", "127.0.0.1 localhost\n127.0.0.1 istiod.istio-system.svc\n");
    const mounted = (file: string) => ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', file];
    const byName = { PILOT_ADDRESS: `istiod.istio-system.svc:${v.istiodPort}`, CA_ADDR: `istiod.istio-system.svc:${v.istiodPort}`, ISTIOD_SAN: "" };

    let r = await v.doctor(["--hostsFile", "/etc/hosts"], byName, mounted(hosts));
    expect(line(r.out, "ok", "hosts istiod", "/etc/hosts line 2: 127.0.0.1 istiod.istio-system.svc")).toBeDefined();
    expect(line(r.out, "ok", "resolve istiod", "istiod.istio-system.svc (discoveryAddress (PROXY_CONFIG)) resolves to 127.0.0.1")).toBeDefined();
    expect(line(r.out, "ok", "tls istiod", "name istiod.istio-system.svc matches")).toBeDefined();
    expect(r.code).toBe(0);

    v.write("hosts-without", "127.0.0.1 localhost\n");
    r = await v.doctor(["--hostsFile", "/etc/hosts"], byName, mounted(join(v.box.dir, "hosts-without")));
    expect(
      line(r.out, "FAIL", "hosts istiod", "istiod.istio-system.svc (discoveryAddress (PROXY_CONFIG)) is not in /etc/hosts and does not resolve"),
    ).toBeDefined();
    expect(r.out).toContain('fix: add "<istiod\'s address> istiod.istio-system.svc" to /etc/hosts');
    expect(r.code).toBe(1);
  }, 60_000);
});
