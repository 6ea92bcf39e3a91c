// The suites' requirement check under scripts/test.ts: a build that already failed is reported
// as is (never retried inside a test), and "prebuilt" means only the stamps are checked.

import { afterEach, expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { BUILD_ERROR_ENV, findGo, interopUnmet, PREBUILT_ENV } from "./support/go-build.ts";

describeRequiring({ check: () => (findGo() ? undefined : "Go (https://go.dev/dl, or set INTEROP_GO)") }, "interop build outcome as the suites see it", () => {
  const saved = { err: process.env[BUILD_ERROR_ENV], pre: process.env[PREBUILT_ENV] };
  afterEach(() => {
    for (const [k, v] of [
      [BUILD_ERROR_ENV, saved.err],
      [PREBUILT_ENV, saved.pre],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  test("a failed build is every suite's unmet requirement, with go's first lines", () => {
    process.env[BUILD_ERROR_ENV] = "go build (in test/interop) exited 1:\nistiod-lite/main.go:1: boom\nmore";
    const t0 = performance.now();
    expect(interopUnmet()).toBe("the Go interop binaries, whose build failed: go build (in test/interop) exited 1: | istiod-lite/main.go:1: boom | more");
    // No build was attempted: answering took no time a Go build could fit in.
    expect(performance.now() - t0).toBeLessThan(1000);
  });
});
