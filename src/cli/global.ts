// Root persistent flags of pilot-agent (pkg/log/options.go): logging. They are accepted before or
// after the subcommand, as cobra does.

import type { FlagSpec, ParsedFlags } from "../lib/flags.ts";
import { LogSink, parseScopedLevels } from "../lib/log.ts";
import { appendFileSync } from "node:fs";
import { CliError } from "./io.ts";
import { errorMessage } from "../lib/errors.ts";

export const GLOBAL_FLAGS: FlagSpec[] = [
  {
    name: "log_target",
    type: "stringArray",
    default: ["stdout"],
    usage: "The set of paths where to output the log. This can be any path as well as the special values stdout and stderr",
  },
  { name: "log_as_json", type: "bool", default: false, usage: "Whether to format output as JSON or in plain console-friendly format" },
  {
    name: "log_output_level",
    type: "string",
    default: "default:info,grpc:none",
    usage:
      "Comma-separated minimum per-scope logging level of messages to output, in the form of <scope>:<level>,<scope>:<level>,... where level can be one of [debug, info, warn, error, fatal, none]",
  },
  {
    name: "log_stacktrace_level",
    type: "string",
    default: "default:none",
    usage: "Comma-separated minimum per-scope logging level at which stack traces are captured",
  },
  {
    name: "log_caller",
    type: "string",
    default: "",
    usage: "Comma-separated list of scopes for which to include caller information, scopes can be any of [all, default, ...]",
  },
  { name: "vklog", type: "int", default: 0, usage: "number for the log level verbosity. Like -v flag. ex: --vklog=9" },
];

/** Build the log sink from parsed global flags. */
export function logSinkFromFlags(parsed: ParsedFlags, write: { stdout: (s: string) => void; stderr: (s: string) => void }): LogSink {
  const v = parsed.values;
  try {
    parseScopedLevels(String(v.log_stacktrace_level), "--log_stacktrace_level");
  } catch (e) {
    throw new CliError(errorMessage(e), undefined, { cause: e });
  }
  const targets = (v.log_target as string[]).length ? (v.log_target as string[]) : ["stdout"];
  const writers = targets.map((t) => (t === "stdout" ? write.stdout : t === "stderr" ? write.stderr : (line: string) => appendFileSync(t, line)));
  try {
    return new LogSink({
      outputLevels: String(v.log_output_level),
      json: Boolean(v.log_as_json),
      callerScopes: String(v.log_caller),
      write: (line) => {
        for (const w of writers) w(line + "\n");
      },
    });
  } catch (e) {
    throw new CliError(errorMessage(e), undefined, { cause: e });
  }
}
