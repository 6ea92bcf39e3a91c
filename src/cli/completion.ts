// `agent completion bash|fish|powershell|zsh [--no-descriptions]`: a shell completion script, as
// cobra offers for pilot-agent. Cobra's scripts call back into the binary for every keystroke;
// ours are static: the command tree (commands, aliases, flags, positional words) is written into
// the script when it is generated, so completing never starts the agent. The scripts complete
// for both `agent` and `pilot-agent` (the binary installed under Istio's name).

import { COMMAND_TREE, HELP_FLAG, PROGRAM, type Shell } from "./commands.ts";
import { GLOBAL_FLAGS } from "./global.ts";
import type { FlagSpec } from "../lib/flags.ts";

export const COMPLETED_NAMES = [PROGRAM, "pilot-agent"] as const;

/** One completable word and its description. */
interface Word {
  word: string;
  desc: string;
}

/** What may follow a command: its positional words and its flags. */
export interface CompletionTable {
  /** "" is the root: the command names. */
  words: Map<string, Word[]>;
  flags: Map<string, Word[]>;
  /** Alias -> command. */
  aliases: Map<string, string>;
}

function flagWords(specs: readonly FlagSpec[]): Word[] {
  const out: Word[] = [];
  for (const s of specs) {
    if (s.hidden) continue;
    const desc = oneLine(s.usage);
    out.push({ word: `--${s.name}`, desc });
    if (s.short) out.push({ word: `-${s.short}`, desc });
  }
  return out;
}

function oneLine(s: string): string {
  const first = s.split("\n")[0]!;
  return first.length > 100 ? `${first.slice(0, 97)}...` : first;
}

export async function completionTable(): Promise<CompletionTable> {
  const words = new Map<string, Word[]>();
  const flags = new Map<string, Word[]>();
  const aliases = new Map<string, string>();
  words.set(
    "",
    COMMAND_TREE.map((c) => ({ word: c.name, desc: c.short })),
  );
  flags.set("", flagWords([...GLOBAL_FLAGS, HELP_FLAG(PROGRAM)]));
  for (const c of COMMAND_TREE) {
    const own = [...(await c.flags()), HELP_FLAG(c.name)];
    flags.set(c.name, flagWords(c.inheritsGlobals ? [...own, ...GLOBAL_FLAGS] : own));
    const positional =
      c.name === "help"
        ? COMMAND_TREE.filter((x) => x.name !== "help").map((x) => ({ word: x.name, desc: x.short }))
        : (c.words ?? []).map((w) => ({ word: w, desc: "" }));
    words.set(c.name, positional);
    for (const a of c.aliases ?? []) aliases.set(a, c.name);
  }
  return { words, flags, aliases };
}

export function completionScript(shell: Shell, t: CompletionTable, descriptions = true): string {
  switch (shell) {
    case "bash":
      return bash(t);
    case "zsh":
      return zsh(t, descriptions);
    case "fish":
      return fish(t, descriptions);
    case "powershell":
      return powershell(t, descriptions);
  }
}

const keysOf = (t: CompletionTable) => [...t.words.keys()].filter((k) => k !== "");
const names = (ws: Word[]) => ws.map((w) => w.word).join(" ");
const sq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

function bash(t: CompletionTable): string {
  const cases = keysOf(t).map((k) => {
    const pats = [k, ...[...t.aliases].filter(([, c]) => c === k).map(([a]) => a)].join("|");
    return `    ${pats}) words=${sq(names(t.words.get(k)!))}; flags=${sq(names(t.flags.get(k)!))} ;;`;
  });
  return `# bash completion for ${PROGRAM} (written by \`${PROGRAM} completion bash\`).
# Load it in this shell with:  source <(${PROGRAM} completion bash)
_${PROGRAM}_complete() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" cmd="" i words flags
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "\${COMP_WORDS[i]}" in
      -*) ;;
      *) cmd="\${COMP_WORDS[i]}"; break ;;
    esac
  done
  case "$cmd" in
    "") words=${sq(names(t.words.get("")!))}; flags=${sq(names(t.flags.get("")!))} ;;
${cases.join("\n")}
    *) words=""; flags="" ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
}
complete -o default -F _${PROGRAM}_complete ${COMPLETED_NAMES.join(" ")}
`;
}

function zsh(t: CompletionTable, descriptions: boolean): string {
  const zw = (ws: Word[]) => ws.map((w) => sq(descriptions && w.desc ? `${w.word.replace(/:/g, "\\:")}:${w.desc}` : w.word.replace(/:/g, "\\:"))).join(" ");
  const cases = keysOf(t).map((k) => {
    const pats = [k, ...[...t.aliases].filter(([, c]) => c === k).map(([a]) => a)].join("|");
    return `    ${pats}) cands=(${zw(t.words.get(k)!)}); opts=(${zw(t.flags.get(k)!)}) ;;`;
  });
  return `#compdef ${COMPLETED_NAMES.join(" ")}
# zsh completion for ${PROGRAM} (written by \`${PROGRAM} completion zsh\`).
# Load it in this shell with:  source <(${PROGRAM} completion zsh)
# or save it as _${PROGRAM} in a directory on $fpath.
_${PROGRAM}() {
  local cmd="" i
  local -a cands opts
  for ((i = 2; i < CURRENT; i++)); do
    [[ "\${words[i]}" == -* ]] && continue
    cmd="\${words[i]}"
    break
  done
  case "$cmd" in
    "") cands=(${zw(t.words.get("")!)}); opts=(${zw(t.flags.get("")!)}) ;;
${cases.join("\n")}
    *) cands=(); opts=() ;;
  esac
  if [[ "\${words[CURRENT]}" == -* ]]; then
    _describe -t flags 'flag' opts
  else
    _describe -t commands 'argument' cands
  fi
}
if [[ "\${funcstack[1]}" == "_${PROGRAM}" ]]; then
  _${PROGRAM} "$@"
else
  compdef _${PROGRAM} ${COMPLETED_NAMES.join(" ")}
fi
`;
}

function fish(t: CompletionTable, descriptions: boolean): string {
  const fq = (s: string) => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
  const d = (w: Word) => (descriptions && w.desc ? ` -d ${fq(w.desc)}` : "");
  const lines = [
    `# fish completion for ${PROGRAM} (written by \`${PROGRAM} completion fish\`).`,
    `# Load it in this shell with:  ${PROGRAM} completion fish | source`,
  ];
  for (const prog of COMPLETED_NAMES) {
    lines.push(`complete -c ${prog} -f`);
    for (const w of t.words.get("")!) lines.push(`complete -c ${prog} -n __fish_use_subcommand -a ${fq(w.word)}${d(w)}`);
    for (const w of t.flags.get("")!) lines.push(`complete -c ${prog} -n __fish_use_subcommand ${fishFlag(w.word)}${d(w)}`);
    for (const k of keysOf(t)) {
      const seen = [k, ...[...t.aliases].filter(([, c]) => c === k).map(([a]) => a)].join(" ");
      const cond = `-n ${fq(`__fish_seen_subcommand_from ${seen}`)}`;
      for (const w of t.words.get(k)!) lines.push(`complete -c ${prog} ${cond} -a ${fq(w.word)}${d(w)}`);
      for (const w of t.flags.get(k)!) lines.push(`complete -c ${prog} ${cond} ${fishFlag(w.word)}${d(w)}`);
    }
  }
  return lines.join("\n") + "\n";
}

function fishFlag(word: string): string {
  return word.startsWith("--") ? `-l ${word.slice(2)}` : `-s ${word.slice(1)}`;
}

function powershell(t: CompletionTable, descriptions: boolean): string {
  const pq = (s: string) => `'${s.replace(/'/g, "''")}'`;
  const entry = (ws: Word[]) => `@(${ws.map((w) => `@(${pq(w.word)}, ${pq(descriptions && w.desc ? w.desc : w.word)})`).join(", ")})`;
  const rows: string[] = [];
  for (const k of ["", ...keysOf(t)]) {
    rows.push(`    ${pq(k)} = @{ words = ${entry(t.words.get(k)!)}; flags = ${entry(t.flags.get(k)!)} }`);
    for (const [a, c] of t.aliases) if (c === k) rows.push(`    ${pq(a)} = @{ words = ${entry(t.words.get(k)!)}; flags = ${entry(t.flags.get(k)!)} }`);
  }
  return `# PowerShell completion for ${PROGRAM} (written by \`${PROGRAM} completion powershell\`).
# Load it in this shell with:  ${PROGRAM} completion powershell | Out-String | Invoke-Expression
Register-ArgumentCompleter -Native -CommandName ${COMPLETED_NAMES.map(pq).join(", ")} -ScriptBlock {
  param($wordToComplete, $commandAst, $cursorPosition)
  $table = @{
${rows.join("\n")}
  }
  $elements = @($commandAst.CommandElements | ForEach-Object { $_.ToString() })
  $cmd = ''
  for ($i = 1; $i -lt $elements.Count; $i++) {
    $e = $elements[$i]
    if ($e -eq $wordToComplete) { break }
    if (-not $e.StartsWith('-')) { $cmd = $e; break }
  }
  $node = $table[$cmd]
  if ($null -eq $node) { return }
  $pool = if ($wordToComplete.StartsWith('-')) { $node.flags } else { $node.words }
  foreach ($p in $pool) {
    if ($p[0] -like "$wordToComplete*") {
      [System.Management.Automation.CompletionResult]::new($p[0], $p[0], 'ParameterValue', $p[1])
    }
  }
}
`;
}

/** Help for `completion <shell> --help`: how to load the script. */
export function shellHelp(shell: Shell): string {
  const how: Record<Shell, string> = {
    bash: `To load completions in your current shell session:\n\n\tsource <(${PROGRAM} completion bash)\n\nTo load completions for every new session, execute once:\n\n\t${PROGRAM} completion bash > /etc/bash_completion.d/${PROGRAM}`,
    zsh: `To load completions in your current shell session:\n\n\tsource <(${PROGRAM} completion zsh)\n\nTo load completions for every new session, execute once:\n\n\t${PROGRAM} completion zsh > "\${fpath[1]}/_${PROGRAM}"`,
    fish: `To load completions in your current shell session:\n\n\t${PROGRAM} completion fish | source\n\nTo load completions for every new session, execute once:\n\n\t${PROGRAM} completion fish > ~/.config/fish/completions/${PROGRAM}.fish`,
    powershell: `To load completions in your current shell session:\n\n\t${PROGRAM} completion powershell | Out-String | Invoke-Expression\n\nTo load completions for every new session, add the output of the above command\nto your powershell profile.`,
  };
  return [
    `Generate the autocompletion script for the ${shell} shell.`,
    "",
    how[shell],
    "",
    "Usage:",
    `  ${PROGRAM} completion ${shell} [flags]`,
    "",
    "Flags:",
    "  -h, --help              help for " + shell,
    "      --no-descriptions   disable completion descriptions",
    "",
  ].join("\n");
}
