import type { AppDeps } from '../../context.ts';

// A renamed slug keeps answering for 30 days (site_slug_redirects, written by renameSlug): its
// host, and its preview-<slug> host, redirect to the bucket's current address. Only asked on a
// miss, so live sites pay nothing; a slug another bucket has taken since is that bucket's.

/** The origin a request for `label` should go to instead, or null. */
export async function renamedSlugOrigin(deps: AppDeps, label: string): Promise<string | null> {
  const preview = label.startsWith('preview-');
  const slug = preview ? label.slice('preview-'.length) : label;
  const row = await deps.db.selectFrom('site_slug_redirects').select(['mailbox_id', 'expires_at']).where('old_slug', '=', slug).executeTakeFirst();
  if (!row || Date.parse(row.expires_at) <= deps.now().getTime()) return null;
  if (await deps.db.selectFrom('site_slugs').select('slug').where('slug', '=', slug).executeTakeFirst()) return null;
  const current = await deps.db.selectFrom('site_slugs').select('slug').where('mailbox_id', '=', row.mailbox_id).executeTakeFirst();
  if (!current || current.slug === slug) return null;
  if (!preview) {
    // The current address is the verified primary custom domain when there is one.
    const m = await deps.db.selectFrom('mailboxes').select('site_domain').where('id', '=', row.mailbox_id).executeTakeFirst();
    if (m?.site_domain) return deps.siteDomainUrl(m.site_domain);
  }
  return deps.siteUrl(preview ? `preview-${current.slug}` : current.slug);
}
