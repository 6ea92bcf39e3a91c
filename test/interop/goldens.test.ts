// The oracle and the goldens agree: every Istio file copied into test/conformance/vectors is
// byte-identical to the same file in the istio.io/istio source the interop suites build from
// (the module go.mod requires, from the module proxy; see support/go-build.ts), except the
// files listed in NOT_IN_ORACLE, which must indeed be absent from it or differ.

import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { findGo, istioSource, ISTIO_VERSION } from "./support/go-build.ts";
import { VECTORS } from "../conformance/vectors.ts";

const CONFORMANCE = VECTORS;

/** conformance folder -> where Istio keeps those files. */
const SOURCES: [string, string, RegExp][] = [
  ["iptables/golden", "tools/istio-iptables/pkg/capture/testdata", /\.golden$/],
  ["iptables-builder/golden", "tools/istio-iptables/pkg/builder/testdata", /\.golden$/],
  ["nftables/golden", "tools/istio-nftables/pkg/capture/testdata", /\.golden$/],
  ["nftables-builder/golden", "tools/istio-nftables/pkg/builder/testdata", /\.golden$/],
  ["bootstrap", "pkg/bootstrap/testdata", /(_golden\.json|\.proxycfg)$/],
];

/**
 * The goldens of the pinned commit (1.32 master) that the oracle (1.31 line) does not have: the
 * global downstream connection settings (istio#60978, merged to master 2026-08-18, after 1.31
 * branched). Our bootstrap is judged against them by the conformance suite alone.
 */
const NOT_IN_ORACLE = [
  "bootstrap/global_downstream_connection_settings.proxycfg",
  "bootstrap/global_downstream_connection_settings_golden.json",
  "bootstrap/global_downstream_connection_settings_with_meta.proxycfg",
  "bootstrap/global_downstream_connection_settings_with_meta_golden.json",
];

/** Every (conformance file, oracle file) pair the README of test/conformance/vectors promises. */
function pairs(): [string, string][] {
  const out: [string, string][] = [["bootstrap/template/envoy_bootstrap.json", "tools/packaging/common/envoy_bootstrap.json"]];
  for (const [dir, src, re] of SOURCES) {
    for (const f of readdirSync(join(CONFORMANCE, dir))
      .filter((x) => re.test(x))
      .sort())
      out.push([`${dir}/${f}`, `${src}/${basename(f)}`]);
  }
  return out;
}

function differs(src: string, ours: string, theirs: string): boolean {
  const p = join(src, theirs);
  return !existsSync(p) || !readFileSync(join(CONFORMANCE, ours)).equals(readFileSync(p));
}

describeRequiring(
  {
    check: () => (!existsSync(CONFORMANCE) ? `the conformance vectors at ${CONFORMANCE}` : findGo() ? undefined : "Go (https://go.dev/dl, or set INTEROP_GO)"),
  },
  "goldens equal the oracle's own testdata",
  () => {
    test(`every golden, proxycfg and the bootstrap template equal istio.io/istio@${ISTIO_VERSION}, but the ${NOT_IN_ORACLE.length} listed`, () => {
      const src = istioSource();
      console.log(`goldens: comparing with ${src}`);
      const all = pairs();
      const differ = all.filter(([ours, theirs]) => differs(src, ours, theirs)).map(([ours]) => ours);
      // Exactly the listed files differ: a new difference fails, and so does a listed file that
      // has come to agree (the list must not go stale silently).
      expect(differ).toEqual(NOT_IN_ORACLE);
      // The folders hold what the README says (a vanished folder must not make this pass).
      expect(all.length).toBe(107); // 106 goldens and proxycfgs, and the template
    });
  },
);
