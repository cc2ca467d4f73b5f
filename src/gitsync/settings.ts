import { invalidArgument } from '../errors.ts';
import { parseTargetUrl, SafeFetchError } from '../net/safe-fetch.ts';
import { GitSyncError } from './errors.ts';

// Checks of the connection fields: the repository URL (the webhook rules: public HTTPS, no
// credentials in it), a branch name git would accept, and a repository folder.

export function parseRepositoryUrl(raw: string): URL {
  let url: URL;
  try {
    url = parseTargetUrl(raw);
  } catch (err) {
    throw new GitSyncError('INVALID_GIT_REPOSITORY_URL', `repository_url: ${(err as SafeFetchError).message}.`, { field: 'repository_url' });
  }
  if (url.search) throw new GitSyncError('INVALID_GIT_REPOSITORY_URL', 'repository_url: must not contain a query.', { field: 'repository_url' });
  return url;
}

/** The URL as stored: the parsed form without a trailing slash. */
export function normalRepositoryUrl(url: URL): string {
  return url.href.replace(/\/+$/, '');
}

export function checkBranch(branch: string): string {
  const b = branch.trim();
  const bad =
    !b ||
    b.length > 255 ||
    !/^[A-Za-z0-9._/+-]+$/.test(b) ||
    b.startsWith('/') ||
    b.startsWith('-') ||
    b.endsWith('/') ||
    b.endsWith('.') ||
    b.endsWith('.lock') ||
    b.includes('..') ||
    b.includes('//') ||
    b.split('/').some((s) => s.startsWith('.'));
  if (bad) throw invalidArgument('branch', 'must be a git branch name (letters, digits, . _ / + -; no .., no leading or trailing /)');
  return b;
}

/** '' for the whole repository; else a folder path without leading or trailing slashes. */
export function checkSubdirectory(raw: string | null | undefined): string {
  const s = (raw ?? '').trim().replace(/^\/+|\/+$/g, '');
  if (!s) return '';
  if (s.length > 1024) throw invalidArgument('subdirectory', 'must be at most 1024 characters');
  for (const seg of s.split('/')) {
    if (!seg || seg === '.' || seg === '..' || /[\u0000-\u001f\\]/.test(seg)) throw invalidArgument('subdirectory', 'must be a folder path of the repository (no empty, . or .. segments, no backslashes)');
  }
  return s;
}
