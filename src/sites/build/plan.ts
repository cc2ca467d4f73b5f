import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { HomeKind } from '../sites.schema.ts';
import { sha256Hex } from '../../ids.ts';
import { exclusionReason, TEMPLATE_NAME } from './exclusions.ts';
import { isHtmlPath } from './content-types.ts';

// Step one of a build: which of the bucket's current files the site serves, under which paths,
// and which home-page rule applies. Reads rows only, never bytes.

/** Raised for problems the owner can fix; the message becomes `publish_error`. */
export class BuildError extends Error {
  override readonly name = 'BuildError';
}

export const MAX_SITE_FILES = 20_000;
/** Bumped when generated pages or the manifest format change, so that old bundles are not reused. */
export const BUILDER_VERSION = 1;

export interface SourceFile {
  /** Path on the site, relative to the served root. */
  path: string;
  sha256: string;
  size: number;
  storedType: string;
}

export interface Plan {
  files: SourceFile[];
  excluded: { path: string; reason: string }[];
  template: SourceFile | null;
  homeKind: HomeKind;
  entryPath: string;
}

/** The bucket's live files with their current versions, in path order. */
export async function currentFiles(db: Kysely<DB>, mailboxId: string): Promise<{ path: string; sha256: string; size: number; storedType: string }[]> {
  const rows = await db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .select(['files.path as path', 'file_versions.sha256 as sha256', 'file_versions.byte_size as size', 'file_versions.mime_type as type'])
    .where('files.mailbox_id', '=', mailboxId)
    .where('files.deleted_at', 'is', null)
    .where('file_versions.deleted', '=', 0)
    .orderBy('files.path')
    .limit(MAX_SITE_FILES * 2 + 1)
    .execute();
  return rows.filter((r) => r.sha256).map((r) => ({ path: r.path, sha256: r.sha256!, size: Number(r.size), storedType: r.type }));
}

export function planSite(all: SourceFile[], rootDirectory: string): Plan {
  const prefix = rootDirectory ? `${rootDirectory}/` : '';
  const under = all.filter((f) => f.path.startsWith(prefix)).map((f) => ({ ...f, path: f.path.slice(prefix.length) }));
  if (rootDirectory && under.length === 0) throw new BuildError(`publication_root_directory "${rootDirectory}" holds no files.`);
  const files: SourceFile[] = [];
  const excluded: Plan['excluded'] = [];
  let template: SourceFile | null = null;
  for (const f of under) {
    // The reason is judged on the bucket path too: `node_modules/…` above the root is still excluded.
    const reason = exclusionReason(f.path) ?? exclusionReason(prefix + f.path);
    if (reason) excluded.push({ path: prefix + f.path, reason });
    else if (f.path === TEMPLATE_NAME) template = f;
    else files.push(f);
  }
  if (files.length === 0) {
    throw new BuildError(excluded.length ? `Nothing to publish: all ${excluded.length} files are excluded (for example ${excluded[0]!.path}: ${excluded[0]!.reason}).` : 'Nothing to publish: the bucket has no files.');
  }
  if (files.length > MAX_SITE_FILES) throw new BuildError(`A site may have at most ${MAX_SITE_FILES} files; this one has ${files.length}.`);
  const paths = new Set(files.map((f) => f.path));
  let homeKind: HomeKind;
  let entryPath: string;
  if (paths.has('index.html') || paths.has('index.htm')) {
    homeKind = 'index';
    entryPath = paths.has('index.html') ? 'index.html' : 'index.htm';
  } else {
    const topHtml = files.filter((f) => !f.path.includes('/') && isHtmlPath(f.path));
    if (topHtml.length === 1) {
      homeKind = 'lone';
      entryPath = topHtml[0]!.path;
    } else {
      homeKind = 'auto';
      entryPath = 'index.html';
    }
  }
  return { files, excluded, template, homeKind, entryPath };
}

/** Everything the bundle's bytes depend on. Equal keys: the existing bundle is reused as it is. */
export function contentKey(plan: Plan, rootDirectory: string, page: { title: string; description: string; accountName: string; logo: { sha256: string } | null }): string {
  return sha256Hex(
    JSON.stringify({
      v: BUILDER_VERSION,
      root: rootDirectory,
      files: plan.files.map((f) => [f.path, f.sha256]),
      // Generated pages show these; other sites do not depend on them.
      page: plan.homeKind === 'auto' ? { ...page, template: plan.template?.sha256 ?? null } : null,
    }),
  );
}
