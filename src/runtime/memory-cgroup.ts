import fs from 'node:fs';
import path from 'node:path';

/**
 * One memory cgroup per session, so a session's processes together cannot use more than
 * its `memory`. cgroup v1 (this host) writes memory.limit_in_bytes, v2 memory.max. The
 * session's first process joins the group before it execs (see launch-wrapper), so every
 * process it forks is inside. Null when the host does not allow it (not root, no memory
 * controller): then limits are not enforced, and the caller logs that once.
 */
export class MemoryCgroups {
  private constructor(
    private readonly root: string,
    private readonly limitFile: string,
  ) {}

  static detect(nodeId: string): MemoryCgroups | null {
    if (process.getuid?.() !== 0) return null;
    try {
      const own = fs.readFileSync('/proc/self/cgroup', 'utf8').split('\n');
      const v1 = own.find((l) => /^\d+:memory:/.test(l));
      let base: string;
      let limitFile: string;
      if (v1 && fs.existsSync('/sys/fs/cgroup/memory/cgroup.procs')) {
        base = path.join('/sys/fs/cgroup/memory', v1.split(':')[2]!);
        limitFile = 'memory.limit_in_bytes';
      } else if (fs.existsSync('/sys/fs/cgroup/cgroup.controllers') && fs.readFileSync('/sys/fs/cgroup/cgroup.controllers', 'utf8').includes('memory')) {
        const v2 = own.find((l) => l.startsWith('0::'));
        base = path.join('/sys/fs/cgroup', v2 ? v2.slice(3) : '/');
        limitFile = 'memory.max';
      } else return null;
      const root = path.join(base, `browserd-${nodeId}`);
      fs.mkdirSync(root, { recursive: true });
      if (limitFile === 'memory.max') {
        // v2: the controller must be enabled for the children of our group.
        fs.writeFileSync(path.join(root, 'cgroup.subtree_control'), '+memory');
      }
      return new MemoryCgroups(root, limitFile);
    } catch {
      return null;
    }
  }

  /** Creates the session's group with its limit; returns the cgroup.procs file a process writes its PID to. */
  create(sessionId: string, bytes: number): string {
    const dir = path.join(this.root, sessionId);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, this.limitFile), String(bytes));
    return path.join(dir, 'cgroup.procs');
  }

  limitOf(sessionId: string): number | null {
    try {
      return Number(fs.readFileSync(path.join(this.root, sessionId, this.limitFile), 'utf8').trim());
    } catch {
      return null;
    }
  }

  /** PIDs the kernel still lists in the session's group. */
  private members(sessionId: string): number[] {
    try {
      return fs
        .readFileSync(path.join(this.root, sessionId, 'cgroup.procs'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map(Number);
    } catch {
      return [];
    }
  }

  /**
   * Removes the session's group. The kernel refuses while it still lists processes, which
   * happens for a moment after a kill (exiting, not yet reaped): those are the session's by
   * membership, so they are killed again and the removal retried until `timeoutMs`.
   * Returns whether the group is gone.
   */
  async remove(sessionId: string, timeoutMs = 5000): Promise<boolean> {
    const dir = path.join(this.root, sessionId);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        fs.rmdirSync(dir);
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
        if (Date.now() >= deadline) return false;
      }
      for (const pid of this.members(sessionId)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * At server stop: removes this node's parent group once no session group is left in it
   * (after a crash, sessions' groups remain and the next start reuses the parent).
   */
  close(): void {
    try {
      fs.rmdirSync(this.root);
    } catch {
      /* sessions still hold groups in it, or already gone */
    }
  }

  /** Removes the groups of sessions not in `keep`. */
  async sweep(keep: Set<string>): Promise<void> {
    for (const name of fs.readdirSync(this.root, { withFileTypes: true })) {
      if (name.isDirectory() && !keep.has(name.name)) await this.remove(name.name);
    }
  }
}

export const GiB = 1024 ** 3;
