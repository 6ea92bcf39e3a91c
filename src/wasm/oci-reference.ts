// OCI image references as go-containerregistry's name package reads them (what Istio's cache keys
// and fetcher use): [registry/]repository[:tag][@digest]; the registry is the first component
// when it has a "." or ":" or is "localhost", else Docker Hub (index.docker.io, with "library/"
// for one-component names); the tag defaults to "latest".

export interface ImageReference {
  registry: string;
  repository: string;
  tag?: string;
  digest?: string;
  /** registry/repository: the module's identity without tag or digest. */
  repositoryName: string;
  /** The digest when pinned, else the tag (defaulted to latest). */
  identifier: string;
}

export const DEFAULT_REGISTRY = "index.docker.io";

const REPO_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const TAG_RE = /^[\w][\w.-]{0,127}$/;
const DIGEST_RE = /^sha256:[a-f0-9]{64}$/;

/** The parsed reference, or undefined when it is not a valid one. */
export function parseImageReference(s: string): ImageReference | undefined {
  let rest = s;
  let digest: string | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST_RE.test(digest)) return undefined;
  }
  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf("/");
  const colon = rest.lastIndexOf(":");
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG_RE.test(tag)) return undefined;
  }
  let registry = DEFAULT_REGISTRY;
  let repository = rest;
  const slash = rest.indexOf("/");
  if (slash >= 0) {
    const first = rest.slice(0, slash);
    if (first.includes(".") || first.includes(":") || first === "localhost") {
      registry = first === "docker.io" ? DEFAULT_REGISTRY : first;
      repository = rest.slice(slash + 1);
    }
  }
  if (registry === DEFAULT_REGISTRY && !repository.includes("/")) repository = `library/${repository}`;
  if (!REPO_RE.test(repository) || repository.length > 255) return undefined;
  if (!digest && !tag) tag = "latest";
  return { registry, repository, tag, digest, repositoryName: `${registry}/${repository}`, identifier: digest ?? tag! };
}
