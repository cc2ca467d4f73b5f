import type { EmailsTable } from '../db/schema.ts';
import type { MailboxRow } from '../mailboxes/mailboxes.repo.ts';
import type { DownloadLink } from '../files/blob.routes.ts';
import { jsonArray, type EmailAddress } from '../emails/emails.present.ts';
import { labelsOf } from '../labels/categories.ts';
import type { StoredAuthResults } from '../inbound/authenticate.ts';
import { formatTime, html, layout, type Html, type LayoutUser } from './html.ts';
import { csrfInput } from './forms.ts';
import type { EmailPage, TopFile, TopFolder } from './mailbox.data.ts';
import { searchForm } from './search.pages.ts';

// Mailbox and email pages. Everything from an email is untrusted: it only ever reaches the page
// through `html` (escaped), the HTML body is never shown, and links are ours (signed downloads).

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

function addressText(a: EmailAddress): Html {
  return a.name ? html`${a.name} <span class="muted">&lt;${a.address}&gt;</span>` : html`${a.address}`;
}

function addressList(json: string): Html {
  const list = jsonArray<EmailAddress>(json).filter((a) => a && typeof a.address === 'string');
  if (!list.length) return html`<span class="muted">—</span>`;
  return html`${list.map((a, i) => html`${i ? ', ' : ''}${addressText(a)}`)}`;
}

function labelTags(row: Pick<EmailsTable, 'label' | 'labeling' | 'direction'>): Html {
  const labels = labelsOf(row.label);
  return html`${row.direction === 'sent' ? html`<span class="tag">sent</span> ` : ''}${labels.map(
    (l) => html`<span class="tag${l.name === 'Junk' ? ' bad' : ''}">${l.name}</span> `,
  )}${row.labeling === 'pending' ? html`<span class="tag">labeling…</span>` : ''}`;
}

export interface MailboxPageInput {
  user: LayoutUser;
  csrf: string;
  mailbox: MailboxRow;
  emails: EmailPage;
  folders: TopFolder[];
  files: TopFile[];
}

export function mailboxPage(p: MailboxPageInput): Html {
  const m = p.mailbox;
  const base = `/mailboxes/${encodeURIComponent(m.id)}`;
  const rows = p.emails.rows.map((e) => {
    const from = jsonArray<EmailAddress>(e.from_addresses)[0];
    const unread = e.read_at === null;
    return html`<tr class="${unread ? 'unread' : ''}">
<td>${unread ? html`<span class="tag ok">unread</span>` : ''}</td>
<td><a href="${base}/emails/${encodeURIComponent(e.id)}">${e.subject || html`<span class="muted">(no subject)</span>`}</a></td>
<td>${from ? addressText(from) : html`<span class="muted">—</span>`}</td>
<td>${formatTime(e.received_at)}</td>
<td>${labelTags(e)}${Number(e.attachment_count) ? html`<span class="tag">📎 ${Number(e.attachment_count)}</span>` : ''}</td>
</tr>`;
  });
  const pager = html`<div class="pager">${p.emails.newer !== null ? html`<a href="${base}?after=${p.emails.newer}">← Newer</a>` : ''}${
    p.emails.older !== null ? html`<a href="${base}?before=${p.emails.older}">Older →</a>` : ''
  }</div>`;
  const fileRows = [
    ...p.folders.map((f) => html`<tr><td><code>${f.name}/</code></td><td>${f.files} file${f.files === 1 ? '' : 's'}</td><td></td></tr>`),
    ...p.files.map(
      (f) => html`<tr><td>${f.link ? html`<a href="${f.link.url}"><code>${f.path}</code></a>` : html`<code>${f.path}</code>`}</td><td>${formatSize(f.size)}</td><td>${formatTime(f.updatedAt)}</td></tr>`,
    ),
  ];
  const body = html`<p class="muted"><a href="/">Dashboard</a> / mailbox</p>
<h1>${mailboxName(m)}${m.archived_at ? html` <span class="tag">archived</span>` : ''}</h1>
${searchForm({ mailboxId: m.id })}
<div class="card">
<dl class="meta">
<dt>Address</dt><dd>${m.address ? html`<code>${m.address}</code>` : html`<span class="muted">none</span>`}</dd>
<dt>Messages</dt><dd>${Number(m.message_count)}</dd>
<dt>Unread</dt><dd>${Number(m.unread_count)}</dd>
<dt>Last received</dt><dd>${formatTime(m.last_received_at)}</dd>
<dt>Id</dt><dd><code>${m.id}</code></dd>
</dl>
</div>
<div class="card">
<h2>Email</h2>
${
  rows.length
    ? html`<table><thead><tr><th></th><th>Subject</th><th>From</th><th>Received</th><th>Labels</th></tr></thead><tbody>${rows}</tbody></table>${pager}`
    : html`<p class="muted">No email here yet.${m.address ? html` Send some to <code>${m.address}</code>.` : ''}</p>`
}
</div>
<div class="card">
<h2>Files</h2>
${
  fileRows.length
    ? html`<table><thead><tr><th>Path</th><th>Size</th><th>Updated</th></tr></thead><tbody>${fileRows}</tbody></table>
<p class="hint">Top level only. Download links work without signing in and expire after 15 minutes.</p>`
    : html`<p class="muted">No files.</p>`
}
</div>`;
  return layout({ title: mailboxName(m), user: p.user, csrf: p.csrf, body });
}

function authSummary(json: string | null): Html {
  let a: StoredAuthResults | null = null;
  try {
    a = json ? (JSON.parse(json) as StoredAuthResults) : null;
  } catch {
    a = null;
  }
  if (!a || typeof a !== 'object') return html`<span class="muted">not checked</span>`;
  const tag = (name: string, result: string | null | undefined) =>
    html`<span class="tag${result === 'pass' ? ' ok' : result === 'fail' || result === 'softfail' ? ' bad' : ''}">${name}: ${result ?? 'none'}</span> `;
  const dkim = Array.isArray(a.dkim) && a.dkim.length ? a.dkim.map((d) => tag('DKIM', d?.result)) : [tag('DKIM', 'none')];
  return html`${tag('SPF', a.spf?.result)}${dkim}${tag('DMARC', a.dmarc?.result)}`;
}

export interface EmailPageInput {
  user: LayoutUser;
  csrf: string;
  mailbox: MailboxRow;
  email: EmailsTable;
  raw: DownloadLink | null;
  attachments: { filename: string; contentType: string; size: number; link: DownloadLink | null }[];
}

export function emailPage(p: EmailPageInput): Html {
  const e = p.email;
  const base = `/mailboxes/${encodeURIComponent(p.mailbox.id)}`;
  const here = `${base}/emails/${encodeURIComponent(e.id)}`;
  const unread = e.read_at === null;
  const toggle = html`<form class="inline" method="post" action="${here}/${unread ? 'read' : 'unread'}">${csrfInput(p.csrf)}<button type="submit">${
    unread ? 'Mark as read' : 'Mark as unread'
  }</button></form>`;
  const attachments = p.attachments.map(
    (a) => html`<tr><td>${a.link ? html`<a href="${a.link.url}">${a.filename}</a>` : a.filename}</td><td><code>${a.contentType}</code></td><td>${formatSize(a.size)}</td></tr>`,
  );
  const omitted = Number(e.omitted_attachment_count);
  const body = html`<p class="muted"><a href="/">Dashboard</a> / <a href="${base}">${mailboxName(p.mailbox)}</a> / email</p>
<h1>${e.subject || html`<span class="muted">(no subject)</span>`}</h1>
<div class="card">
<p>${unread ? html`<span class="tag ok">unread</span> ` : html`<span class="tag">read</span> `}${labelTags(e)}</p>
<dl class="meta">
<dt>From</dt><dd>${addressList(e.from_addresses)}</dd>
<dt>To</dt><dd>${addressList(e.to_addresses)}</dd>
${jsonArray(e.cc_addresses).length ? html`<dt>Cc</dt><dd>${addressList(e.cc_addresses)}</dd>` : ''}
${jsonArray(e.reply_to_addresses).length ? html`<dt>Reply-To</dt><dd>${addressList(e.reply_to_addresses)}</dd>` : ''}
<dt>${e.direction === 'sent' ? 'Sent' : 'Received'}</dt><dd>${formatTime(e.received_at)}</dd>
${e.direction === 'received' ? html`<dt>Authentication</dt><dd>${authSummary(e.auth_results)}</dd>` : ''}
<dt>Id</dt><dd><code>${e.id}</code></dd>
</dl>
<div class="actions">${toggle}${p.raw ? html` <a href="${p.raw.url}">Download original (.eml)</a>` : ''}</div>
</div>
<div class="card">
<h2>Message</h2>
${e.body_text ? html`<pre class="mail">${e.body_text}</pre>` : html`<p class="muted">This email has no plain-text body${e.body_status !== 'complete' ? html` (${e.body_status})` : ''}.</p>`}
${e.body_text && e.body_status === 'truncated' ? html`<p class="hint">The text is cut short; the original message has all of it.</p>` : ''}
</div>
<div class="card">
<h2>Attachments</h2>
${
  attachments.length
    ? html`<table><thead><tr><th>File</th><th>Type</th><th>Size</th></tr></thead><tbody>${attachments}</tbody></table>`
    : html`<p class="muted">None.</p>`
}
${omitted ? html`<p class="hint">${omitted} attachment${omitted === 1 ? ' was' : 's were'} not stored.</p>` : ''}
</div>`;
  return layout({ title: e.subject || '(no subject)', user: p.user, csrf: p.csrf, body });
}

