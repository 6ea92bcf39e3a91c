// The operator's commands as the command tree lists them (commands.ts): `agent status` and
// `agent debug`. Only their flag lists are imported, when help or completion asks.

import type { CommandInfo } from "./commands.ts";

export const DEBUG_COMMAND: CommandInfo = {
  name: "debug",
  short: "Prints the agent's own state or log levels from its status port",
  long: "Prints the agent's own state (config_dump) or its log levels (logging) from its status port on localhost.\nGive logging a <scope>:<level>,... spec (the syntax of --log_output_level) to set levels.",
  use: "debug config_dump|logging [<scope>:<level>,...]",
  words: ["config_dump", "logging"],
  flags: async () => (await import("./debug.ts")).DEBUG_FLAGS,
  inheritsGlobals: true,
};

export const STATUS_COMMAND: CommandInfo = {
  name: "status",
  short: "Shows the agent's identity, istiod connection, xDS streams and readiness",
  use: "status",
  flags: async () => (await import("./status.ts")).STATUS_FLAGS,
  inheritsGlobals: true,
};
