// The oracle and the goldens agree: every Istio file copied into ../shared/conformance is
// byte-identical to the same file in the istio.io/istio source the interop suites build from
// (test/interop/.deps/istio, the pinned commit; see support/go-build.ts).

import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { interopUnmet, ISTIO_SRC, ISTIO_VERSION, SOURCE_NOTE } from "./support/go-build.ts";

const CONFORMANCE = resolve(import.meta.dir, "../../../shared/conformance");

/** conformance folder -> where Istio keeps those files. */
const SOURCES: [string, string, RegExp][] = [
  ["iptables/golden", "tools/istio-iptables/pkg/capture/testdata", /\.golden$/],
  ["iptables-builder/golden", "tools/istio-iptables/pkg/builder/testdata", /\.golden$/],
  ["nftables/golden", "tools/istio-nftables/pkg/capture/testdata", /\.golden$/],
  ["nftables-builder/golden", "tools/istio-nftables/pkg/builder/testdata", /\.golden$/],
  ["bootstrap", "pkg/bootstrap/testdata", /(_golden\.json|\.proxycfg)$/],
];

describeRequiring({ check: () => (existsSync(CONFORMANCE) ? interopUnmet(["pilot-agent"]) : `the conformance vectors at ${CONFORMANCE}`) }, "goldens equal the oracle's own testdata", () => {
  test(`every golden, proxycfg and the bootstrap template equal istio.io/istio@${ISTIO_VERSION}`, () => {
    console.log(`goldens: comparing with ${readFileSync(join(ISTIO_SRC, SOURCE_NOTE), "utf8").trim()}`);
    const pairs: [string, string][] = [["bootstrap/template/envoy_bootstrap.json", "tools/packaging/common/envoy_bootstrap.json"]];
    for (const [dir, src, re] of SOURCES) {
      for (const f of readdirSync(join(CONFORMANCE, dir)).filter((x) => re.test(x)).sort()) pairs.push([`${dir}/${f}`, `${src}/${basename(f)}`]);
    }
    const differ = pairs.filter(([ours, theirs]) => {
      const p = join(ISTIO_SRC, theirs);
      return !existsSync(p) || !readFileSync(join(CONFORMANCE, ours)).equals(readFileSync(p));
    });
    expect(differ.map(([o, t]) => `${o} != ${t}`)).toEqual([]);
    // The folders hold what the README says (a vanished folder must not make this pass).
    expect(pairs.length).toBeGreaterThanOrEqual(100);
  });
});
