// Template selection and rendering (Istio's pkg/bootstrap/instance.go): which template file is
// used, where the output goes, and rendering the template text with the parameters. Pure, except
// that it is handed the template text by the caller.

import { posix } from "node:path";
import defaultTemplate from "./default_bootstrap.tmpl" with { type: "text" };
import { BootstrapError } from "./errors.ts";
import { bootstrapFuncs, deserializeParsed, parseTemplate, Template, TemplateError } from "./gotemplate/index.ts";
import { builtinTemplateTree } from "./builtin-ast.ts" with { type: "macro" };
import type { ProxyConfig } from "../config/proxyconfig.ts";

/** Where the proxy image ships Istio's template. */
export const DEFAULT_TEMPLATE_PATH = "./var/lib/istio/envoy/envoy_bootstrap_tmpl.json";
/** Name used in errors for the agent's own template. */
export const BUILTIN_TEMPLATE_NAME = "<built-in default bootstrap template>";

/** The built-in template's parse tree as JSON, inlined by the bundler. */
const BUILTIN_TREE: string = builtinTemplateTree();

export function builtinTemplateText(): string {
  return defaultTemplate;
}

/** GetEffectiveTemplatePath: ISTIO_BOOTSTRAP > customConfigFile > proxyBootstrapTemplatePath > default. */
export function effectiveTemplatePath(pc: ProxyConfig, istioBootstrap: string): string {
  if (istioBootstrap) return istioBootstrap;
  if (pc.customConfigFile) return pc.customConfigFile;
  if (pc.proxyBootstrapTemplatePath) return pc.proxyBootstrapTemplatePath;
  return DEFAULT_TEMPLATE_PATH;
}

/** `<configPath>/envoy-rev.json`, or `.yaml` for a `.yaml`/`.yaml.tmpl` template. */
export function bootstrapOutputPath(configPath: string, templatePath: string): string {
  const suffix = templatePath.endsWith(".yaml.tmpl") || templatePath.endsWith(".yaml") ? "yaml" : "json";
  return posix.join(configPath, `envoy-rev.${suffix}`);
}

/** Parse a bootstrap template with Istio's function map (builtins + sprig + toJSON). */
export function compileTemplate(name: string, text: string, env: Readonly<Record<string, string | undefined>> = {}): Template {
  // The built-in template was parsed at bundle time (builtin-ast.ts).
  if (text === defaultTemplate) return Template.fromParsed(name, text, deserializeParsed(BUILTIN_TREE), { funcs: bootstrapFuncs(env) });
  try {
    return parseTemplate(name, text, { funcs: bootstrapFuncs(env) });
  } catch (e) {
    if (e instanceof TemplateError) throw new BootstrapError(`bootstrap template: ${e.message}`, name, { cause: e });
    throw e;
  }
}

export function renderTemplate(tmpl: Template, params: Record<string, unknown>): string {
  try {
    return tmpl.execute(params);
  } catch (e) {
    if (e instanceof TemplateError) throw new BootstrapError(`bootstrap template: ${e.message}`, tmpl.file, { cause: e });
    throw e;
  }
}
