// Writing the Envoy bootstrap (the thin I/O shell around params.ts and render.ts): Istio's
// Instance.CreateFile. Creates <configPath> (0700), picks the template, writes the lightstep token
// file when tracing asks for it, renders and writes <configPath>/envoy-rev.json.
// The file operations are synchronous: a few local syscalls on the agent's start path, where a
// round trip through the thread pool per operation would cost more than the syscall.

import { accessSync, mkdirSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import type { BootstrapNode } from "../config/metadata.ts";
import type { ProxyConfig } from "../config/proxyconfig.ts";
import { BootstrapError } from "./errors.ts";
import { toTemplateParams, type BootstrapFlags } from "./params.ts";
import {
  bootstrapOutputPath,
  BUILTIN_TEMPLATE_NAME,
  builtinTemplateText,
  compileTemplate,
  DEFAULT_TEMPLATE_PATH,
  effectiveTemplatePath,
  renderTemplate,
} from "./render.ts";
import type { Template } from "./gotemplate/index.ts";
import { FILE_LIMITS, readBoundedTextSync } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";

export interface CreateBootstrapInput {
  node: BootstrapNode;
  compliancePolicy: string;
  logAsJson: boolean;
  flags: BootstrapFlags;
  /** ISTIO_BOOTSTRAP (template path override). */
  templateOverride: string;
  /** Directory relative paths resolve against (the agent's working directory). */
  root: string;
  /** Environment for the sprig `env`/`expandenv` functions. */
  env?: Readonly<Record<string, string | undefined>>;
  /** The template, read and compiled earlier by `prepareTemplate` (with these same inputs); read and compiled here when absent. */
  template?: Promise<PreparedTemplate>;
}

/** A bootstrap template read and compiled, ready to render. */
export interface PreparedTemplate {
  name: string;
  path: string;
  compiled: Template;
}

export interface CreatedBootstrap {
  /** Absolute path of the written bootstrap. */
  path: string;
  /** The template used (a path, or the built-in template's name). */
  template: string;
  /** Rendered text. */
  text: string;
  /** Ignored inputs (bad annotations...), to be logged as warnings. */
  problems: string[];
}

function exists(p: string): boolean {
  try {
    accessSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Load the template text: the effective path, or our built-in template when the image's default is absent. */
export async function loadTemplate(pc: ProxyConfig, templateOverride: string, root: string): Promise<{ name: string; path: string; text: string }> {
  const path = effectiveTemplatePath(pc, templateOverride);
  const abs = resolve(root, path);
  if (path === DEFAULT_TEMPLATE_PATH && !exists(abs)) {
    return { name: BUILTIN_TEMPLATE_NAME, path, text: builtinTemplateText() };
  }
  try {
    return { name: path, path, text: readBoundedTextSync(abs, FILE_LIMITS.config) };
  } catch (e) {
    throw new BootstrapError(`cannot read bootstrap template ${path}: ${errorMessage(e)}`, path, { cause: e });
  }
}

/**
 * Read and compile the template (ISTIO_BOOTSTRAP, the image's file, or the built-in one). Separate
 * from rendering so the start path can do it while the agent's sockets come up: Istio's own
 * template file takes several ms to parse, and nothing it yields is visible before the write.
 */
export async function prepareTemplate(
  pc: ProxyConfig,
  templateOverride: string,
  root: string,
  env: Readonly<Record<string, string | undefined>> = {},
): Promise<PreparedTemplate> {
  const tmpl = await loadTemplate(pc, templateOverride, root);
  return { name: tmpl.name, path: tmpl.path, compiled: compileTemplate(tmpl.name, tmpl.text, env) };
}

export async function createBootstrapFile(inp: CreateBootstrapInput): Promise<CreatedBootstrap> {
  const pc = inp.node.typed.PROXY_CONFIG as ProxyConfig;
  const configPath = pc.configPath ?? "./etc/istio/proxy";
  const configDir = resolve(inp.root, configPath);
  try {
    mkdirSync(configDir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new BootstrapError(`cannot create bootstrap directory ${configDir}: ${errorMessage(e)}`, configPath, { cause: e });
  }
  // Awaited after the directory is made, so its errors come in the same order as before.
  const tmpl = await (inp.template ?? prepareTemplate(pc, inp.templateOverride, inp.root, inp.env));
  const { params, lightstepToken, problems } = toTemplateParams({
    node: inp.node,
    compliancePolicy: inp.compliancePolicy,
    logAsJson: inp.logAsJson,
    flags: inp.flags,
  });
  problems.unshift(...inp.node.problems);
  if (lightstepToken) {
    const tokenPath = resolve(inp.root, lightstepToken.path);
    try {
      writeFileSync(tokenPath, lightstepToken.token, { mode: 0o666 });
    } catch (e) {
      throw new BootstrapError(`cannot write lightstep access token file ${tokenPath}: ${errorMessage(e)}`, tokenPath, { cause: e });
    }
  }
  const text = renderTemplate(tmpl.compiled, params);
  const out = resolve(inp.root, bootstrapOutputPath(configPath, tmpl.path));
  try {
    writeFileSync(out, text, { mode: 0o666 });
  } catch (e) {
    throw new BootstrapError(`cannot write bootstrap ${out}: ${errorMessage(e)}`, out, { cause: e });
  }
  return { path: out, template: tmpl.name, text, problems };
}
