// A Kubernetes secret volume on disk, written the way kubelet's AtomicWriter writes it: the files
// live in a timestamped hidden directory, `..data` is a symlink to it, and each visible name is a
// symlink through `..data`. An update writes a new timestamped directory, points `..data_tmp` at
// it, renames `..data_tmp` over `..data` (one atomic step), then removes the old directory.

import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";

export interface KubeVolume {
  dir: string;
  /** Publish a new version of every file (the same names as the first). */
  update(files: Record<string, string>): void;
}

export function kubeVolume(dir: string, files: Record<string, string>): KubeVolume {
  mkdirSync(dir, { recursive: true });
  let current = "";
  let n = 0;
  const publish = (f: Record<string, string>) => {
    const ts = `..2026_11_27_21_00_00.${process.pid}${n++}`;
    mkdirSync(join(dir, ts));
    for (const [name, text] of Object.entries(f)) writeFileSync(join(dir, ts, name), text);
    symlinkSync(ts, join(dir, "..data_tmp"));
    renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
    for (const name of Object.keys(f)) if (!existsSync(join(dir, name))) symlinkSync(join("..data", name), join(dir, name));
    if (current) rmSync(join(dir, current), { recursive: true, force: true });
    current = ts;
  };
  publish(files);
  return { dir, update: publish };
}
