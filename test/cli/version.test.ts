import { describe, expect, test } from "bun:test";
import { runVersion } from "../../src/cli/version.ts";
import type { CliIO } from "../../src/cli/io.ts";

const info = { version: "1.4.0", revision: "0123456789ab", status: "Clean", runtime: "bun1.4.5", istioVersion: "1.32.0", istioCommit: "86c9f01fd735" };

function run(args: string[]): string {
  const out: string[] = [];
  const io: CliIO = { out: (s) => out.push(s), err: () => {}, env: {}, cwd: "/" };
  expect(runVersion(args, io, info)).toBe(0);
  return out.join("");
}

// Expected text written from Istio's pkg/version/cobra.go and version.go (86c9f01): Fprintf of
// "client version: %s\n" with Version (short) or LongForm() = fmt "%#v" of BuildInfo; JSON is
// MarshalIndent(&Version{ClientVersion}, "", "  ") + Println's newline; YAML is sigs.k8s.io/yaml
// (keys sorted) + Println's newline.
describe("version output in Istio's shape", () => {
  test("default: client version: version.BuildInfo{...}", () => {
    expect(run([])).toBe(
      'client version: version.BuildInfo{Version:"1.4.0", GitRevision:"0123456789ab", GolangVersion:"bun1.4.5", BuildStatus:"Clean", GitTag:"1.4.0", IstioVersion:"1.32.0", IstioRevision:"86c9f01fd735"}\n',
    );
  });

  test("--short and -s: client version: <version>", () => {
    expect(run(["--short"])).toBe("client version: 1.4.0\n");
    expect(run(["-s"])).toBe("client version: 1.4.0\n");
  });

  test("-o json: Istio's keys in Istio's order, then ours (runtime, the Istio release stood in for)", () => {
    expect(run(["-o", "json"])).toBe(
      '{\n  "clientVersion": {\n    "version": "1.4.0",\n    "revision": "0123456789ab",\n    "golang_version": "bun1.4.5",\n    "status": "Clean",\n    "tag": "1.4.0",\n    "runtime_version": "bun1.4.5",\n    "istio_version": "1.32.0",\n    "istio_revision": "86c9f01fd735"\n  }\n}\n',
    );
  });

  test("-o yaml: sorted keys and the trailing blank line", () => {
    expect(run(["--output=yaml"])).toBe(
      "clientVersion:\n  golang_version: bun1.4.5\n  istio_revision: 86c9f01fd735\n  istio_version: 1.32.0\n  revision: 0123456789ab\n  runtime_version: bun1.4.5\n  status: Clean\n  tag: 1.4.0\n  version: 1.4.0\n\n",
    );
  });

  test("bad --output is Istio's error", () => {
    const io: CliIO = { out: () => {}, err: () => {}, env: {}, cwd: "/" };
    expect(() => runVersion(["-o", "xml"], io, info)).toThrow("--output must be 'yaml' or 'json'");
  });
});
