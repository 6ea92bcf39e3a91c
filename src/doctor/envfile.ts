// The shell variable files istio-start.sh sources with `set -a` (cluster.env, sidecar.env, as
// `istioctl x workload entry configure` writes them): `NAME=value`, `NAME='value'`, `NAME="value"`,
// `export NAME=value`, comments and blank lines. Anything else is reported with its line number:
// the shell would run it, not read it.

export interface EnvFile {
  values: Record<string, string>;
  /** `line N: ...` for lines that are not a plain assignment. */
  problems: string[];
}

const ASSIGN = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/;

export function parseEnvFile(text: string): EnvFile {
  const values: Record<string, string> = {};
  const problems: string[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.replace(/\r$/, "").trim();
    if (line === "" || line.startsWith("#")) return;
    const m = ASSIGN.exec(line);
    if (!m) {
      problems.push(`line ${i + 1}: not a NAME=value assignment: ${line.slice(0, 80)}`);
      return;
    }
    const v = unquote(m[2]!);
    if (v === undefined) {
      problems.push(`line ${i + 1}: ${m[1]}: unterminated or mixed quotes`);
      return;
    }
    values[m[1]!] = v;
  });
  return { values, problems };
}

/** A shell word without expansions: 'single', "double" (\" \\ \$ \` escapes), or bare up to a comment. */
function unquote(v: string): string | undefined {
  if (v.startsWith("'")) return v.length >= 2 && v.endsWith("'") && !v.slice(1, -1).includes("'") ? v.slice(1, -1) : undefined;
  if (v.startsWith('"')) {
    if (v.length < 2 || !v.endsWith('"')) return undefined;
    const body = v.slice(1, -1);
    if (/(^|[^\\])"/.test(body)) return undefined;
    return body.replace(/\\(["\\$`])/g, "$1");
  }
  const bare = v.replace(/\s+#.*$/, "");
  return /['"]/.test(bare) ? undefined : bare;
}
