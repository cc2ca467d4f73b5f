import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { HttpClient } from 'isomorphic-git';
import { GitSyncError } from './errors.ts';

// Reading a branch of a remote repository with isomorphic-git (no git binary): the branch head
// from the ref advertisement, then a shallow, single-branch fetch into a temporary bare
// repository, whose tree is listed and whose blobs are read on demand. The directory is removed
// when the work is done. isomorphic-git is loaded on first use: most servers never sync a
// repository, and it holds about 3 MB of every process's heap once loaded.

export interface TreeFile {
  /** Path relative to the synced subdirectory. */
  path: string;
  oid: string;
}

export interface SkippedEntry {
  path: string;
  reason: 'symlink' | 'submodule' | 'invalid_path' | 'email_area' | 'forbidden_type';
}

export interface RemoteLimits {
  maxFiles: number;
}

/** Turns isomorphic-git's failures into the codes a connection's error shows. */
export function gitFailure(err: unknown): GitSyncError {
  if (err instanceof GitSyncError) return err;
  // isomorphic-git's Errors.<Name>.code, spelled out: this runs without the library loaded.
  const e = err as { code?: string; data?: { statusCode?: number; statusMessage?: string }; message?: string; caller?: string };
  if (e?.code === 'HttpError') {
    const status = e.data?.statusCode ?? 0;
    if (status === 401 || status === 403) return new GitSyncError('GIT_AUTH_FAILED', `The git host answered ${status}: the token is missing, wrong or cannot read this repository.`, { status });
    if (status === 404) return new GitSyncError('GIT_REPOSITORY_NOT_FOUND', 'The git host answered 404: no repository at this URL (or the token cannot see it).', { status });
    // Redirects are not followed (the next host would escape the address check): say so.
    if (status >= 300 && status < 400) return new GitSyncError('GIT_REPOSITORY_NOT_FOUND', `The git host answered ${status} (a redirect, which Cubby does not follow): use the repository's current clone URL.`, { status });
    return new GitSyncError('GIT_REPOSITORY_UNREACHABLE', `The git host answered ${status} ${e.data?.statusMessage ?? ''}`.trim(), { status });
  }
  if (e?.code === 'SmartHttpError' || e?.code === 'ParseError' || e?.code === 'UnknownTransportError') {
    return new GitSyncError('GIT_REPOSITORY_NOT_FOUND', 'The URL does not answer as a git repository over smart HTTP.');
  }
  return new GitSyncError('GIT_REPOSITORY_UNREACHABLE', `Reading the repository failed: ${e?.message ?? String(err)}`.slice(0, 500));
}

/** The commit the branch points at on the remote. */
export async function remoteHead(http: HttpClient, url: string, branch: string): Promise<string> {
  try {
    const { default: git } = await import('isomorphic-git');
    const refs = await git.listServerRefs({ http, url, prefix: `refs/heads/${branch}`, protocolVersion: 1 });
    const hit = refs.find((r) => r.ref === `refs/heads/${branch}`);
    if (!hit) throw new GitSyncError('GIT_BRANCH_NOT_FOUND', `The repository has no branch ${branch}.`, { branch });
    return hit.oid;
  } catch (err) {
    throw gitFailure(err);
  }
}

export interface FetchedTree {
  commit: string;
  files: TreeFile[];
  skipped: SkippedEntry[];
  readBlob(oid: string): Promise<Buffer>;
  close(): Promise<void>;
}

/** Fetches the branch (depth 1) and lists the files under `subdirectory`. */
export async function fetchTree(http: HttpClient, url: string, branch: string, subdirectory: string, limits: RemoteLimits, pathCheck: (p: string) => SkippedEntry['reason'] | null): Promise<FetchedTree> {
  const gitdir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cubby-git-'));
  const close = () => fsp.rm(gitdir, { recursive: true, force: true });
  try {
    const { default: git, Errors } = await import('isomorphic-git');
    await git.init({ fs, gitdir, bare: true, defaultBranch: branch });
    await git.addRemote({ fs, gitdir, remote: 'origin', url });
    let commit: string;
    try {
      const res = await git.fetch({ fs, http, gitdir, remote: 'origin', ref: branch, singleBranch: true, depth: 1, tags: false });
      if (!res.fetchHead) throw new GitSyncError('GIT_BRANCH_NOT_FOUND', `The repository has no branch ${branch}.`, { branch });
      commit = res.fetchHead;
    } catch (err) {
      if ((err as { code?: string }).code === Errors.NotFoundError.code) throw new GitSyncError('GIT_BRANCH_NOT_FOUND', `The repository has no branch ${branch}.`, { branch });
      throw gitFailure(err);
    }
    let treeOid = (await git.readCommit({ fs, gitdir, oid: commit })).commit.tree;
    for (const segment of subdirectory ? subdirectory.split('/') : []) {
      const entries = (await git.readTree({ fs, gitdir, oid: treeOid })).tree;
      const next = entries.find((e) => e.path === segment && e.type === 'tree');
      if (!next) throw new GitSyncError('GIT_SUBDIRECTORY_NOT_FOUND', `The branch ${branch} has no folder ${subdirectory}.`, { subdirectory });
      treeOid = next.oid;
    }
    const files: TreeFile[] = [];
    const skipped: SkippedEntry[] = [];
    const walk = async (oid: string, prefix: string): Promise<void> => {
      for (const e of (await git.readTree({ fs, gitdir, oid })).tree) {
        const p = prefix ? `${prefix}/${e.path}` : e.path;
        if (e.type === 'tree') await walk(e.oid, p);
        else if (e.type === 'commit') skipped.push({ path: p, reason: 'submodule' });
        else if (e.mode === '120000') skipped.push({ path: p, reason: 'symlink' });
        else {
          const bad = pathCheck(p);
          if (bad) skipped.push({ path: p, reason: bad });
          else {
            files.push({ path: p, oid: e.oid });
            if (files.length > limits.maxFiles) throw new GitSyncError('GIT_TOO_MANY_FILES', `The synced tree has more than ${limits.maxFiles} files.`, { max_files: limits.maxFiles });
          }
        }
      }
    };
    await walk(treeOid, '');
    return {
      commit,
      files,
      skipped,
      readBlob: async (oid) => Buffer.from((await git.readBlob({ fs, gitdir, oid })).blob),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
