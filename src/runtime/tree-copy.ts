import fs from 'node:fs';
import path from 'node:path';

/**
 * Copying directory trees between browserd's own storage and session directories. A
 * session directory belongs to the unprivileged session user, who may have put links or
 * special files there: reads from it never follow links (see copyTree).
 */

export function safeReaddir(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * Copies regular files and directories from `src` to `dst` (which exists). Symlinks,
 * sockets, devices and FIFOs are skipped. With `rootReal`, every directory read must
 * resolve inside it (a directory swapped for a link mid-copy is skipped).
 */
export function copyTree(src: string, dst: string, filter: (rel: string, isDir: boolean) => boolean, rootReal?: string, rel = ''): void {
  for (const name of safeReaddir(path.join(src, rel))) {
    const r = rel ? path.join(rel, name) : name;
    const from = path.join(src, r);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(from);
    } catch {
      continue;
    }
    if (st.isDirectory()) {
      if (!filter(r, true)) continue;
      if (rootReal) {
        const real = fs.realpathSync(from);
        if (real !== path.join(rootReal, r)) continue;
      }
      fs.mkdirSync(path.join(dst, r), { mode: 0o700 });
      copyTree(src, dst, filter, rootReal, r);
    } else if (st.isFile()) {
      if (!filter(r, false)) continue;
      copyFileNoFollow(from, path.join(dst, r));
    }
  }
}

function copyFileNoFollow(from: string, to: string): void {
  let fd: number;
  try {
    fd = fs.openSync(from, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch {
    return; // vanished or replaced by a link
  }
  try {
    if (!fs.fstatSync(fd).isFile()) return;
    const out = fs.openSync(to, 'wx', 0o600);
    try {
      const buf = Buffer.allocUnsafe(1024 * 1024);
      let n: number;
      while ((n = fs.readSync(fd, buf, 0, buf.length, null)) > 0) fs.writeSync(out, buf, 0, n);
    } finally {
      fs.closeSync(out);
    }
  } finally {
    fs.closeSync(fd);
  }
}

export function chownTree(dir: string, uid: number, gid: number): void {
  fs.lchownSync(dir, uid, gid);
  for (const name of safeReaddir(dir)) {
    const p = path.join(dir, name);
    const st = fs.lstatSync(p);
    if (st.isDirectory()) chownTree(p, uid, gid);
    else fs.lchownSync(p, uid, gid);
  }
}
