// Istio's bootstrap golden tests (test/conformance/vectors/bootstrap, README §3), plus every case of
// $CONFORMANCE_DIR/bootstrap when set. One test per case, named after it: render with Istio's
// template through the agent's code, normalise, check the stats-matcher lists, compare as JSON
// (deep equality, key order ignored), check the lightstep token file, and validate the output
// strictly against envoy.config.bootstrap.v3.Bootstrap.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvoySchema } from "../bootstrap/envoy_schema.ts";
import { loadSuite, normalise, renderCase, BOOTSTRAP_VECTORS, statsMatcherLists, stripStatsMatcher, type Suite } from "../bootstrap/conformance_harness.ts";

const suites: Suite[] = [loadSuite(BOOTSTRAP_VECTORS)];
const extra = process.env.CONFORMANCE_DIR;
if (extra && existsSync(join(extra, "bootstrap", "cases.json"))) suites.push(loadSuite(join(extra, "bootstrap")));

let schema: EnvoySchema;
let tmp: string;
beforeAll(() => {
  schema = new EnvoySchema();
  tmp = mkdtempSync(join(tmpdir(), "bootstrap-conformance-"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

for (const suite of suites) {
  describe(`bootstrap conformance (${suite.dir})`, () => {
    test("the template from the suite exists", () => {
      expect(existsSync(suite.templatePath)).toBe(true);
    });
    for (const c of suite.cases) {
      test(c.name, async () => {
        const dir = mkdtempSync(join(tmp, `${c.name}-`));
        const { text } = await renderCase(suite, c, dir);
        const generated = JSON.parse(normalise(suite, c, text, dir));
        const golden = JSON.parse(readFileSync(join(suite.dir, c.golden), "utf8"));

        const expected = c.other_inputs.expected_stats_matcher;
        expect(statsMatcherLists(generated)).toEqual({
          prefixes_joined: expected.prefixes_joined,
          suffixes_joined: expected.suffixes_joined,
          regexps_joined: expected.regexps_joined,
        });
        expect(stripStatsMatcher(generated)).toEqual(stripStatsMatcher(golden));
        expect(generated.node.metadata.PROXY_CONFIG).toEqual(c.other_inputs.effective_proxy_config);

        const token = join(dir, "bootstrap", c.other_inputs.proxycfg_base, "lightstep_access_token.txt");
        expect(existsSync(token)).toBe(c.other_inputs.expect_lightstep_access_token_file);

        expect(schema.validateBootstrap(generated)).toEqual([]);
        expect(schema.validateBootstrap(golden)).toEqual([]);
      });
    }
  });
}
