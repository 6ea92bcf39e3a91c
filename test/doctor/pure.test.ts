// The pure parts of `agent doctor`: the shell env-file reader, istio-start.sh's environment, the
// rule canonical form that lets an iptables-save dump be compared with `agent iptables`' rules,
// and the report's exit code. Expected values are literals.

import { describe, expect, test } from "bun:test";
import { parseEnvFile } from "../../src/doctor/envfile.ts";
import { vmEnvironment } from "../../src/doctor/vmenv.ts";
import { canonicalRule, captureDifferences } from "../../src/doctor/capture.ts";
import { stateFromSave } from "../../src/iptables/builder.ts";
import { exitCodeOf, formatReport, fail, ok, warn } from "../../src/doctor/finding.ts";
import { hostsEntries } from "../../src/doctor/network.ts";

describe("cluster.env as istio-start.sh sources it", () => {
  test("quoted, bare, exported values; comments; bad lines named by number", () => {
    const f = parseEnvFile(`# made by istioctl\nA='x y'\nexport B="a \\"q\\" \\$HOME"\nC=plain # note\nD=\n\nnot an assignment\nE='unterminated\n`);
    expect(f.values).toEqual({ A: "x y", B: 'a "q" $HOME', C: "plain", D: "" });
    expect(f.problems).toEqual(["line 7: not a NAME=value assignment: not an assignment", "line 8: E: unterminated or mixed quotes"]);
  });
});

describe("istio-start.sh's environment", () => {
  const host = { shortHostname: "vm-1", firstIp: "10.0.0.5" };
  test("defaults for what is unset", () => {
    const { env, serviceCluster } = vmEnvironment({}, {}, {}, host);
    expect(serviceCluster).toBe("rawvm");
    expect(env.PROV_CERT).toBe("/etc/certs");
    expect(env.OUTPUT_CERTS).toBe("/etc/certs");
    expect(env.CA_ADDR).toBe("istiod.istio-system.svc:15012");
    expect(env.PROXY_CONFIG).toBe("\nserviceCluster: rawvm\ncontrolPlaneAuthPolicy: MUTUAL_TLS\ndiscoveryAddress: istiod.istio-system.svc:15012\n");
    expect([env.INSTANCE_IP, env.POD_NAME, env.POD_NAMESPACE]).toEqual(["10.0.0.5", "vm-1", "default"]);
  });
  test("cluster.env wins over sidecar.env and the inherited environment; an empty PROV_CERT stays empty", () => {
    const { env, serviceCluster } = vmEnvironment(
      { TRUST_DOMAIN: "inherited", PROV_CERT: "" },
      { TRUST_DOMAIN: "sidecar", ISTIO_PILOT_PORT: "15010" },
      { TRUST_DOMAIN: "cluster", ISTIO_NAMESPACE: "vm-ns", ISTIO_SERVICE: "app.vm-ns", ISTIO_SYSTEM_NAMESPACE: "mesh" },
      host,
    );
    expect(env.TRUST_DOMAIN).toBe("cluster");
    expect(env.PROV_CERT).toBe("");
    expect(env.POD_NAMESPACE).toBe("vm-ns");
    expect(serviceCluster).toBe("app.vm-ns");
    expect(env.CA_ADDR).toBe("istiod.mesh.svc:15010");
  });
});

describe("capture rules compared with iptables-save's form", () => {
  test("iptables-save's additions and order do not count", () => {
    expect(canonicalRule("-A ISTIO_INBOUND -p tcp --dport 15008 -j RETURN")).toBe(canonicalRule("-A ISTIO_INBOUND -p tcp -m tcp --dport 15008 -j RETURN"));
    expect(canonicalRule("-A ISTIO_OUTPUT -o lo -s 127.0.0.6/32 -j RETURN")).toBe(canonicalRule("-A ISTIO_OUTPUT -s 127.0.0.6 -o lo -j RETURN"));
    expect(canonicalRule("-A ISTIO_OUTPUT -o lo ! -d 127.0.0.1/32 -j RETURN")).toBe("! -d 127.0.0.1/32 -o lo -j RETURN");
    expect(canonicalRule("-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -j RETURN")).not.toBe(canonicalRule("-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN"));
  });
  test("differences name the table, chain and rule; other chains are ignored", () => {
    const expected = stateFromSave(
      "*nat\n:ISTIO_INBOUND - [0:0]\n-A PREROUTING -p tcp -j ISTIO_INBOUND\n-A ISTIO_INBOUND -p tcp --dport 22 -j RETURN\nCOMMIT\n",
    );
    const actual = stateFromSave(
      "*nat\n:ISTIO_INBOUND - [0:0]\n-A PREROUTING -p tcp -j ISTIO_INBOUND\n-A PREROUTING -p tcp -j DOCKER\n-A ISTIO_INBOUND -p tcp -m tcp --dport 23 -j RETURN\nCOMMIT\n",
    );
    expect(captureDifferences(expected, actual)).toEqual([
      "nat/ISTIO_INBOUND: missing --dport 22 -p tcp -j RETURN",
      "nat/ISTIO_INBOUND: unexpected --dport 23 -p tcp -j RETURN",
    ]);
  });
});

test("hosts entries: every line naming the host, comments ignored", () => {
  expect(
    hostsEntries("127.0.0.1 localhost\n10.0.0.9 istiod.istio-system.svc istiod # east-west\n# 10.0.0.8 istiod.istio-system.svc\n", "istiod.istio-system.svc"),
  ).toEqual([{ line: 2, ip: "10.0.0.9" }]);
});

test("report: fix under its line, counts, exit 1 only when something failed", () => {
  const findings = [ok("a", "fine"), warn("bb", "hmm", "look"), fail("c", "broken", "mend it")];
  expect(formatReport(findings)).toBe(
    "ok    a   fine\nwarn  bb  hmm\n          fix: look\nFAIL  c   broken\n          fix: mend it\n1 failed, 1 warnings, 1 ok, 0 skipped\n",
  );
  expect(exitCodeOf(findings)).toBe(1);
  expect(exitCodeOf(findings.slice(0, 2))).toBe(0);
});
