import type { EmailsTable } from '../db/schema.ts';
import type { MailboxRow } from '../mailboxes/mailboxes.repo.ts';
import type { DownloadLink } from '../files/blob.routes.ts';
import { jsonArray, type EmailAddress } from '../emails/emails.present.ts';
import { CATEGORY_NAMES, labelsOf } from '../labels/categories.ts';
import type { StoredAuthResults } from '../inbound/authenticate.ts';
import type { HeaderField } from '../inbound/parse-types.ts';
import { formatTime, html, layout, type Html, type LayoutUser } from './html.ts';
import { csrfInput } from './forms.ts';
import { addressChip } from './ui.ts';
import type { EmailFilters, EmailPage } from './mailbox.data.ts';
import { searchForm } from './search.pages.ts';

// Mailbox and email pages. Everything from an email is untrusted: it reaches the page only
// through `html` (escaped); the HTML body is shown only inside a sandboxed frame served by its
// own route with its own CSP (email.pages.ts), and links are ours (signed downloads).

export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = bytes / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

export function mailboxName(m: Pick<MailboxRow, 'title' | 'address' | 'id'>): string {
  return m.title || m.address || m.id;
}

export function mailboxBase(m: Pick<MailboxRow, 'id'>): string {
  return `/mailboxes/${encodeURIComponent(m.id)}`;
}

function addressText(a: EmailAddress): Html {
  return a.name ? html`${a.name} <span class="muted">&lt;${a.address}&gt;</span>` : html`${a.address}`;
}

export function addresses(json: string): EmailAddress[] {
  return jsonArray<EmailAddress>(json).filter((a) => a && typeof a.address === 'string');
}

function addressList(json: string): Html {
  const list = addresses(json);
  if (!list.length) return html`<span class="muted">—</span>`;
  return html`${list.map((a, i) => html`${i ? ', ' : ''}${addressText(a)}`)}`;
}

function labelTags(row: Pick<EmailsTable, 'label' | 'labeling' | 'direction'>): Html {
  const labels = labelsOf(row.label);
  return html`${row.direction === 'sent' ? html`<span class="tag">sent</span> ` : ''}${labels.map(
    (l) => html`<span class="tag${l.name === 'Junk' ? ' bad' : ''}">${l.name}</span> `,
  )}${row.labeling === 'pending' ? html`<span class="tag">labeling…</span>` : ''}`;
}

export type MailboxTab = 'mail' | 'files' | 'site' | 'settings';

export interface MailboxHeaderInput {
  mailbox: MailboxRow;
  tab: MailboxTab;
  canWrite: boolean;
  canAdmin: boolean;
  csrf: string;
}

/** Title, address, counts and the tabs shared by every page of a mailbox. */
export function mailboxHeader(p: MailboxHeaderInput): Html {
  const m = p.mailbox;
  const base = mailboxBase(m);
  const tabs: [MailboxTab, string, string][] = [
    ['mail', 'Mail', base],
    ['files', 'Files', `${base}/files`],
    ['site', 'Site', `${base}/site`],
    ['settings', 'Settings', `${base}/settings`],
  ];
  const site = (m as MailboxRow & { site_state?: string | null }).site_state;
  return html`<p class="crumbs"><a href="/?account=${m.account_id}">Mailboxes</a> / ${mailboxName(m)}</p>
<div class="head"><div><h1>${mailboxName(m)}${m.archived_at ? html` <span class="tag">archived</span>` : ''}${site === 'published' ? html` <span class="tag ok">published</span>` : ''}</h1>
<div class="small">${addressChip(m.address)} <span class="muted">· <span id="unread-count">${Number(m.unread_count)}</span> unread · ${Number(m.message_count)} emails · ${Number(m.files_count)} files · ${formatSize(Number(m.storage_bytes))}</span></div></div>
<div class="actions">${p.canWrite && !m.archived_at ? html`<a class="button" href="${base}/compose">Compose</a>` : ''}${
    p.canWrite && !m.archived_at
      ? html`<form class="inline" method="post" action="${base}/archive">${csrfInput(p.csrf)}<button class="secondary" type="submit">Archive</button></form>`
      : ''
  }${p.canAdmin && m.archived_at ? html`<form class="inline" method="post" action="${base}/unarchive">${csrfInput(p.csrf)}<button class="secondary" type="submit">Unarchive</button></form>` : ''}</div></div>
<nav class="tabs" aria-label="Mailbox">${tabs.map(([id, text, href]) => html`<a href="${href}"${id === p.tab ? html` aria-current="page"` : ''}>${text}</a>`)}</nav>`;
}

export interface MailboxPageInput {
  user: LayoutUser;
  csrf: string;
  mailbox: MailboxRow;
  emails: EmailPage;
  filters: EmailFilters;
  canWrite: boolean;
  canAdmin: boolean;
  notice: Html;
}

/** Query string for the list's filters (and an optional position). */
export function filterQuery(f: EmailFilters, extra: Record<string, string | number> = {}): string {
  const q = new URLSearchParams();
  if (f.unread) q.set('unread', '1');
  if (f.label) q.set('label', f.label);
  if (f.sender) q.set('sender', f.sender);
  if (f.attachments) q.set('attachments', '1');
  if (f.direction) q.set('direction', f.direction);
  for (const [k, v] of Object.entries(extra)) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function emailRow(base: string, e: EmailPage['rows'][number]): Html {
  const from = addresses(e.from_addresses)[0];
  const to = addresses(e.to_addresses);
  const unread = e.read_at === null;
  const who = e.direction === 'sent' ? html`<span class="muted">To</span> ${to.length ? addressText(to[0]!) : '—'}${to.length > 1 ? ` +${to.length - 1}` : ''}` : from ? addressText(from) : html`<span class="muted">—</span>`;
  const attachments = Number(e.attachment_count);
  return html`<li class="${unread ? 'unread' : ''}" data-seq="${Number(e.seq)}">
<div class="main"><a class="title" href="${base}/emails/${encodeURIComponent(e.id)}">${unread ? html`<span class="dot" aria-hidden="true"></span><span class="sr-only">Unread: </span>` : ''}${
    e.subject || html`<span class="muted">(no subject)</span>`
  }</a>
<div class="small">${who}${e.body_text ? html` <span class="muted">— ${e.body_text.replace(/\s+/g, ' ').slice(0, 120)}</span>` : ''}</div></div>
<div class="side">${labelTags(e)}${attachments ? html`<span class="tag" title="attachments">${attachments} attachment${attachments === 1 ? "" : "s"}</span>` : ''}${formatTime(e.received_at)}</div>
</li>`;
}

export function mailboxPage(p: MailboxPageInput): Html {
  const m = p.mailbox;
  const base = mailboxBase(m);
  const f = p.filters;
  const filtered = Boolean(f.unread || f.label || f.sender || f.attachments || f.direction);
  const pager = html`<div class="pager">${p.emails.newer !== null ? html`<a href="${base}${filterQuery(f, { after: p.emails.newer })}">← Newer</a>` : ''}${
    p.emails.older !== null ? html`<a href="${base}${filterQuery(f, { before: p.emails.older })}">Older →</a>` : ''
  }</div>`;
  const filterForm = html`<form method="get" action="${base}" class="toolbar" aria-label="Filter mail">
<label class="choice"><input type="checkbox" name="unread" value="1"${f.unread ? html` checked` : ''}> Unread</label>
<label class="choice"><input type="checkbox" name="attachments" value="1"${f.attachments ? html` checked` : ''}> Attachments</label>
<label for="flt-direction" class="sr-only">Direction</label><select id="flt-direction" name="direction"><option value="">Received and sent</option><option value="received"${f.direction === 'received' ? html` selected` : ''}>Received</option><option value="sent"${f.direction === 'sent' ? html` selected` : ''}>Sent</option></select>
<label for="flt-label" class="sr-only">Label</label><select id="flt-label" name="label"><option value="">Any label</option>${CATEGORY_NAMES.map((n) => html`<option${f.label === n ? html` selected` : ''}>${n}</option>`)}</select>
<label for="flt-sender" class="sr-only">Sender address</label><input class="grow" id="flt-sender" type="search" name="sender" value="${f.sender ?? ''}" placeholder="Sender address  ( / )">
<button class="secondary" type="submit">Filter</button>${filtered ? html`<a href="${base}">Clear</a>` : ''}
</form>`;
  const live = !filtered && p.emails.newer === null;
  const body = html`${mailboxHeader({ mailbox: m, tab: 'mail', canWrite: p.canWrite, canAdmin: p.canAdmin, csrf: p.csrf })}
${p.notice}
${searchForm({ mailboxId: m.id })}
${filterForm}
<div class="card flush">
${
  p.emails.rows.length
    ? html`<ul class="rows" data-keys${live ? html` data-live="${base}/live"` : ''}>${p.emails.rows.map((e) => emailRow(base, e))}</ul>`
    : html`<ul class="rows" data-keys${live ? html` data-live="${base}/live"` : ''}></ul><div class="empty">${
        filtered ? 'No email matches these filters.' : m.address ? html`No email here yet. Send some to <code>${m.address}</code>.` : 'No email here yet.'
      }</div>`
}
</div>
${pager}
<p class="hint">Keys: <kbd>j</kbd>/<kbd>k</kbd> move, <kbd>Enter</kbd> opens, <kbd>/</kbd> searches.${live ? ' New mail appears here as it arrives.' : ''}</p>`;
  return layout({ title: mailboxName(m), user: p.user, csrf: p.csrf, body, active: 'mailboxes' });
}

interface AuthCheck {
  name: string;
  result: string;
  why: string;
}

function authChecks(json: string | null): AuthCheck[] | null {
  let a: StoredAuthResults | null = null;
  try {
    a = json ? (JSON.parse(json) as StoredAuthResults) : null;
  } catch {
    a = null;
  }
  if (!a || typeof a !== 'object') return null;
  const explain: Record<string, string> = {
    pass: 'passed',
    fail: 'failed: the sending server or signature is not authorized for this domain',
    softfail: 'soft-failed: the domain says this server is probably not allowed to send for it',
    neutral: 'neutral: the domain makes no statement about this server',
    none: 'not published by the sender’s domain',
    temperror: 'could not be checked (temporary DNS error)',
    permerror: 'could not be checked (the domain’s record is broken)',
    policy: 'not accepted by policy',
  };
  const rec = a as unknown as Record<string, { result?: string; domain?: string } | { result?: string; domain?: string }[] | undefined>;
  const one = (name: string, r: { result?: string; domain?: string } | undefined): AuthCheck => {
    const result = r?.result ?? 'none';
    return { name, result, why: `${explain[result] ?? result}${r?.domain ? ` (${r.domain})` : ''}` };
  };
  const dkim = Array.isArray(rec.dkim) && rec.dkim.length ? rec.dkim.map((d) => one('DKIM', d)) : [one('DKIM', undefined)];
  return [one('SPF', rec.spf as { result?: string }), ...dkim, one('DMARC', rec.dmarc as { result?: string })];
}

function authSection(json: string | null): Html {
  const checks = authChecks(json);
  if (!checks) return html`<span class="muted">not checked</span>`;
  const dmarc = checks.find((c) => c.name === 'DMARC')!;
  const spf = checks.find((c) => c.name === 'SPF')!;
  const verdict =
    dmarc.result === 'pass'
      ? 'The sender is authenticated: DMARC passed, so the From domain vouches for this message.'
      : spf.result === 'pass' || checks.some((c) => c.name === 'DKIM' && c.result === 'pass')
        ? 'Partly authenticated: a check passed, but not aligned with the From domain (DMARC did not pass).'
        : 'Not authenticated: nothing proves this message comes from the domain in From. Be careful with links and requests.';
  return html`<p class="small">${verdict}</p><ul class="small">${checks.map(
    (c) => html`<li><span class="tag${c.result === 'pass' ? ' ok' : c.result === 'fail' || c.result === 'softfail' ? ' bad' : ''}">${c.name}: ${c.result}</span> ${c.why}</li>`,
  )}</ul>`;
}

export type EmailView = 'html' | 'text' | 'headers' | 'source';

export interface EmailPageInput {
  user: LayoutUser;
  csrf: string;
  mailbox: MailboxRow;
  email: EmailsTable;
  view: EmailView;
  hasHtml: boolean;
  hasRemote: boolean;
  remote: boolean;
  headers: HeaderField[] | null;
  source: { text: string; cut: boolean } | null;
  raw: DownloadLink | null;
  attachments: { id: string; filename: string; contentType: string; size: number; link: DownloadLink | null }[];
  canWrite: boolean;
  canAdmin: boolean;
  notice: Html;
}

export function emailPage(p: EmailPageInput): Html {
  const e = p.email;
  const base = mailboxBase(p.mailbox);
  const here = `${base}/emails/${encodeURIComponent(e.id)}`;
  const unread = e.read_at === null;
  const writable = p.canWrite && !p.mailbox.archived_at;
  const toggle = html`<form class="inline" method="post" action="${here}/${unread ? 'read' : 'unread'}">${csrfInput(p.csrf)}<button class="secondary" type="submit">${
    unread ? 'Mark as read' : 'Mark as unread'
  }</button></form>`;
  const replies =
    writable && e.direction === 'received'
      ? html`<a class="button" href="${base}/compose?reply=${e.id}">Reply</a><a class="button secondary" href="${base}/compose?reply=${e.id}&amp;all=1">Reply all</a>`
      : '';
  const forward = writable ? html`<a class="button secondary" href="${base}/compose?forward=${e.id}">Forward</a>` : '';
  const del =
    p.canAdmin && !p.mailbox.archived_at
      ? html`<details><summary class="small">Delete…</summary><form method="post" action="${here}/delete">${csrfInput(p.csrf)}<p class="small">This removes the email and its files from the mailbox.</p><button class="danger small" type="submit">Delete email</button></form></details>`
      : '';
  const junk = labelsOf(e.label).some((l) => l.name === 'Junk');
  const withheld = junk
    ? html`<div class="alert bad" role="note">This email was labeled <strong>Junk</strong>. API keys and agents cannot read its content; you see it because you are signed in. If it is not junk, reply or forward what you need — nothing here runs or loads by itself.</div>`
    : e.labeling === 'pending'
      ? html`<div class="alert info" role="note">This email is still being labeled. Agents see its content once labeling finishes; you can read it now.</div>`
      : '';
  const views: [EmailView, string][] = [
    ...(p.hasHtml ? ([['html', 'HTML']] as [EmailView, string][]) : []),
    ['text', 'Text'],
    ['headers', 'Headers'],
    ['source', 'Source'],
  ];
  let content: Html;
  if (p.view === 'html' && p.hasHtml) {
    content = html`${
      p.hasRemote && !p.remote
        ? html`<div class="alert info small" role="note">Remote images are blocked so the sender cannot see when you open this. <a class="button secondary small" href="${here}?remote=1">Load remote content</a></div>`
        : ''
    }<iframe class="mail-html" title="Email content" sandbox="allow-popups allow-popups-to-escape-sandbox" referrerpolicy="no-referrer" src="${here}/body.html${p.remote ? '?remote=1' : ''}"></iframe>`;
  } else if (p.view === 'headers') {
    content = p.headers
      ? html`<div class="table-wrap"><table><thead><tr><th>Name</th><th>Value</th></tr></thead><tbody>${p.headers.map((h) => html`<tr><td><code>${h.name}</code></td><td><code>${h.value}</code></td></tr>`)}</tbody></table></div>`
      : html`<p class="muted">The original message is not stored.</p>`;
  } else if (p.view === 'source') {
    content = p.source
      ? html`<pre class="source" tabindex="0">${p.source.text}</pre>${p.source.cut ? html`<p class="hint">Cut short; download the original for all of it.</p>` : ''}`
      : html`<p class="muted">The original message is not stored.</p>`;
  } else {
    content = e.body_text
      ? html`<pre class="mail" tabindex="0">${e.body_text}</pre>${e.body_status === 'truncated' ? html`<p class="hint">The text is cut short; the original message has all of it.</p>` : ''}`
      : html`<p class="muted">This email has no plain-text body${e.body_status !== 'complete' ? html` (${e.body_status})` : ''}.</p>`;
  }
  const attachments = p.attachments.map(
    (a) => html`<li><div class="main">${a.link ? html`<a class="title" href="${a.link.url}" download="${a.filename}">${a.filename}</a>` : html`<span class="title">${a.filename}</span>`}
<div class="small muted"><code>${a.contentType}</code> · ${formatSize(a.size)}</div></div>
<div class="side">${
      a.link && /^(image\/(png|jpe?g|gif|webp|bmp)|audio\/|video\/|application\/pdf|text\/)/i.test(a.contentType)
        ? html`<a href="${here}/attachments/${a.id}" target="_blank" rel="noopener" aria-label="Preview ${a.filename}">Preview</a>`
        : ''
    }${a.link ? html`<a href="${a.link.url}" aria-label="Download ${a.filename}">Download</a>` : html`<span>not stored</span>`}</div>${
      a.link && /^image\/(png|jpe?g|gif|webp|bmp)$/i.test(a.contentType) ? html`<img class="preview-img thumb" src="${here}/attachments/${a.id}" alt="${a.filename}" loading="lazy">` : ''
    }</li>`,
  );
  const omitted = Number(e.omitted_attachment_count);
  const body = html`<p class="crumbs"><a href="/?account=${p.mailbox.account_id}">Mailboxes</a> / <a href="${base}">${mailboxName(p.mailbox)}</a> / email</p>
${p.notice}
<div class="head"><h1>${e.subject || html`<span class="muted">(no subject)</span>`}</h1><div class="actions">${replies}${forward}${toggle}</div></div>
${withheld}
<div class="card">
<p>${unread ? html`<span class="tag ok">unread</span> ` : html`<span class="tag">read</span> `}${labelTags(e)}</p>
<dl class="meta">
<dt>From</dt><dd>${addressList(e.from_addresses)}</dd>
<dt>To</dt><dd>${addressList(e.to_addresses)}</dd>
${jsonArray(e.cc_addresses).length ? html`<dt>Cc</dt><dd>${addressList(e.cc_addresses)}</dd>` : ''}
${jsonArray(e.reply_to_addresses).length ? html`<dt>Reply-To</dt><dd>${addressList(e.reply_to_addresses)}</dd>` : ''}
<dt>${e.direction === 'sent' ? 'Sent' : 'Received'}</dt><dd>${formatTime(e.received_at)}</dd>
${e.direction === 'received' ? html`<dt>Authentication</dt><dd>${authSection(e.auth_results)}</dd>` : ''}
<dt>Id</dt><dd><code>${e.id}</code></dd>
</dl>
<div class="actions">${p.raw ? html`<a href="${p.raw.url}">Download original (.eml)</a>` : ''}${del}</div>
</div>
<div class="card">
<nav class="tabs" aria-label="Message views">${views.map(([v, text]) => html`<a href="${here}?view=${v}${p.remote ? '&remote=1' : ''}"${v === p.view ? html` aria-current="page"` : ''}>${text}</a>`)}</nav>
${content}
</div>
<div class="card flush">
<h2>Attachments</h2>
${attachments.length ? html`<ul class="rows">${attachments}</ul>` : html`<p class="empty">None.</p>`}
${omitted ? html`<p class="hint">${omitted} attachment${omitted === 1 ? ' was' : 's were'} not stored.</p>` : ''}
</div>`;
  return layout({ title: e.subject || '(no subject)', user: p.user, csrf: p.csrf, body, active: 'mailboxes' });
}
