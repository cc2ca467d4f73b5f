import MarkdownIt from 'markdown-it';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { downloadLink } from '../files/blob.routes.ts';
import { appendText, deleteFile, loadFile, readFileBytes, relocateFile, restoreVersion } from '../files/files.service.ts';
import { cleanFolder, isEmailPath } from '../files/paths.ts';
import { formatTime, html, layout, raw, sendPage, type Html } from './html.ts';
import { csrfInput, formField, type FormBody } from './forms.ts';
import { mayChange, openMailbox, type OpenedMailbox } from './person-ctx.ts';
import { csrfToken, toSignIn, type WebSession } from './session.ts';
import { attempt, notice, refusalPage } from './ui.ts';
import { formatSize, mailboxBase, mailboxHeader, mailboxName } from './mailbox.views.ts';
import { notFound } from './mailbox.pages.ts';
import { crumbs, decodeCursor, folderListing, lineDiff, type FileSort, type FolderPosition } from './files.data.ts';

// Files of a mailbox in the browser: folders with breadcrumbs, sorting and keyset paging, upload
// (app.js, through an upload session: uploads.pages.ts),
// preview, download, rename/move/copy/delete, append text and the version history with restore
// and a text diff. `_email/` is shown read-only, as the services enforce.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;
const MAX_PREVIEW_TEXT = 512 * 1024;
const md = new MarkdownIt({ html: false, linkify: true, typographer: false });

type FileParams = { id: string; file_id: string };

function isText(mime: string, name: string): boolean {
  return /^text\//i.test(mime) || /^application\/(json|xml|x-yaml|yaml|javascript)/i.test(mime) || /\.(md|markdown|txt|csv|json|ya?ml|log|ts|js|css|html?)$/i.test(name);
}

function filesHref(base: string, folder: string, extra = ''): string {
  return `${base}/files${folder ? `?path=${encodeURIComponent(folder)}${extra ? `&${extra}` : ''}` : extra ? `?${extra}` : ''}`;
}

function breadcrumbs(base: string, folder: string): Html {
  return html`<nav class="crumbs" aria-label="Folder"><a href="${filesHref(base, '')}">Files</a>${crumbs(folder).map((c) => html` / <a href="${filesHref(base, c.path)}">${c.name}</a>`)}</nav>`;
}

async function renderFolder(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, opened: OpenedMailbox, folder: string, sort: FileSort, desc: boolean, at: FolderPosition) {
  const csrf = csrfToken(req, reply, deps);
  const m = opened.loaded.mailbox;
  const base = mailboxBase(m);
  const listing = await folderListing(deps, m.id, folder, sort, desc, at);
  const canWrite = mayChange(opened.loaded) && !m.archived_at;
  const emailArea = folder === '_email' || folder.startsWith('_email/');
  const sortLink = (s: FileSort, text: string) => {
    const nextDesc = sort === s ? !desc : s !== 'name';
    return html`<a href="${filesHref(base, folder, `sort=${s}${nextDesc ? '&dir=desc' : ''}`)}"${sort === s ? html` aria-current="true"` : ''}>${text}${sort === s ? (desc ? ' ↓' : ' ↑') : ''}</a>`;
  };
  // Sorting and paging keep each other: a page link carries the sort, a sort link starts at the top.
  const sortQuery = [sort !== 'name' || desc ? `sort=${sort}` : '', desc ? 'dir=desc' : ''].filter(Boolean).join('&');
  const pageLink = (key: 'after' | 'before', cursor: string) => filesHref(base, folder, [sortQuery, `${key}=${cursor}`].filter(Boolean).join('&'));
  const pager =
    listing.prev || listing.next
      ? html`<nav class="pager" aria-label="Pages of files">${listing.prev ? html`<a href="${filesHref(base, folder, sortQuery)}">⇤ First</a><a href="${pageLink('before', listing.prev)}" rel="prev">← Previous</a>` : ''}${
          listing.next ? html`<a href="${pageLink('after', listing.next)}" rel="next">Next →</a>` : ''
        }</nav>`
      : '';
  const rows = [
    ...listing.folders.map(
      (f) => html`<li><div class="main"><a class="title" href="${filesHref(base, folder ? `${folder}/${f.name}` : f.name)}"><span class="icon-folder" aria-hidden="true"></span>${f.name}/</a></div><div class="side">${f.files} file${f.files === 1 ? '' : 's'}${
        f.name === '_email' && !folder ? html` <span class="tag">read-only</span>` : ''
      }</div></li>`,
    ),
    ...listing.files.map(
      (f) => html`<li><div class="main"><a class="title" href="${base}/files/${f.id}">${f.basename}</a><div class="small muted"><code>${f.mimeType}</code>${f.versions > 1 ? html` · ${f.versions} versions` : ''}</div></div>
<div class="side"><span>${formatSize(f.size)}</span>${formatTime(f.updatedAt)}</div></li>`,
    ),
  ];
  const upload = canWrite && !emailArea
    ? html`<div class="card" id="upload" data-upload="${base}/files/sessions" data-mailbox="${m.id}" data-folder="${folder}">
<h2>Upload</h2>
<div class="alert info small" data-resume hidden role="status"><p data-resume-text></p><div class="actions"><button type="button" class="secondary small" data-cancel>Cancel that upload</button></div></div>
<div class="dropzone" data-dropzone><p>Drop files or folders here, or choose:</p>
<div class="actions"><label class="button secondary" for="pick-files">Choose files</label><input class="sr-only" id="pick-files" type="file" multiple data-pick>
<label class="button secondary" for="pick-folder">Choose a folder</label><input class="sr-only" id="pick-folder" type="file" webkitdirectory multiple data-pick></div></div>
<p class="small" data-upload-message role="status" hidden></p>
<div data-progress hidden><p class="small" data-overall-text></p><progress data-overall max="1" value="0" aria-label="Overall upload progress"></progress><ul class="rows small upload-list" data-files tabindex="0" aria-label="Files of this upload"></ul></div>
<p class="hint">One upload (a pick or a drop) is saved as one version of the mailbox. If the page is closed or reloaded midway, drop or choose the same files again: those already sent are skipped.</p>
<noscript><p class="hint">Uploading from the browser needs JavaScript; the API and the CLI upload too.</p></noscript>
<form method="get" action="${base}/files" class="toolbar"><label for="new-folder">New folder</label><input type="hidden" name="new" value="1"><input class="grow" id="new-folder" name="path" type="text" value="${folder ? `${folder}/` : ''}" required><button class="secondary" type="submit">Open</button></form>
<p class="hint">Folders exist through their files: open a new folder, then upload into it.</p>
</div>`
    : '';
  const body = html`${mailboxHeader({ mailbox: m, tab: 'files', canWrite: mayChange(opened.loaded), canAdmin: mayChange(opened.loaded, 'admin'), csrf })}
${notice(req.query)}
${breadcrumbs(base, folder)}
${emailArea ? html`<div class="alert info small" role="note">Files under <code>_email/</code> are the stored mail: read-only here. Delete an email to remove them.</div>` : ''}
<div id="listing"><div class="card flush">
<div class="toolbar small"><span class="muted">Sort:</span> ${sortLink('name', 'Name')} ${sortLink('size', 'Size')} ${sortLink('date', 'Date')}</div>
${rows.length ? html`<ul class="rows" data-keys>${rows}</ul>` : html`<div class="empty">${folder ? 'This folder is empty.' : 'No files yet.'}</div>`}
</div>
${pager}</div>
${upload}`;
  return sendPage(reply, 200, layout({ title: `Files · ${mailboxName(m)}`, user: session.user, csrf, body, active: 'mailboxes' }));
}

async function loadOpenedFile(opened: OpenedMailbox, fileId: string) {
  try {
    return (await loadFile(opened.ctx, opened.loaded.access.account.id, opened.loaded.mailbox.id, fileId, 'read')).file;
  } catch (err) {
    if (err instanceof AppError && (err.code === 'MAILBOX_FILE_NOT_FOUND' || err.code === 'EMAIL_NOT_FOUND')) return null;
    throw err;
  }
}

export function registerFilesPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/mailboxes/:id/files', ROUTE, async (req: FastifyRequest<{ Params: { id: string }; Querystring: { path?: string; sort?: string; dir?: string; after?: string; before?: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    let folder = '';
    try {
      folder = cleanFolder(typeof req.query.path === 'string' ? req.query.path : '') ?? '';
    } catch {
      folder = '';
    }
    const sort: FileSort = req.query.sort === 'size' || req.query.sort === 'date' ? req.query.sort : 'name';
    const at: FolderPosition = { after: decodeCursor(req.query.after, sort), before: decodeCursor(req.query.before, sort) };
    return renderFolder(req, reply, deps, session, opened, folder, sort, req.query.dir === 'desc', at);
  });

  web.get('/mailboxes/:id/files/:file_id', ROUTE, async (req: FastifyRequest<{ Params: FileParams; Querystring: { diff?: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    const file = await loadOpenedFile(opened, req.params.file_id);
    const m = opened.loaded.mailbox;
    const base = mailboxBase(m);
    if (!file?.current_version_id) return notFound(reply, 'File', { href: `${base}/files`, text: 'Back to the files' }, session);
    const csrf = csrfToken(req, reply, deps);
    const versions = await deps.db.selectFrom('file_versions').selectAll().where('file_id', '=', file.id).orderBy('version_number', 'desc').limit(100).execute();
    const current = versions.find((v) => v.id === file.current_version_id) ?? versions[0]!;
    const link = current.sha256 ? await downloadLink(deps, { sha256: current.sha256, filename: file.basename, contentType: current.mime_type, byteSize: Number(current.byte_size) }) : null;
    const readOnly = isEmailPath(file.path);
    const canWrite = mayChange(opened.loaded) && !m.archived_at && !readOnly;
    const canAdmin = mayChange(opened.loaded, 'admin') && !m.archived_at && !readOnly;
    const here = `${base}/files/${file.id}`;
    const text = isText(current.mime_type, file.basename);

    let preview: Html = html`<p class="muted">No preview for <code>${current.mime_type}</code>; download it to open it.</p>`;
    if (current.sha256 && /^image\/(png|jpe?g|gif|webp|bmp|svg\+xml)$/i.test(current.mime_type)) preview = html`<img src="${here}/raw" alt="${file.basename}" class="preview-img">`;
    else if (current.sha256 && /^audio\//i.test(current.mime_type)) preview = html`<audio controls src="${here}/raw"></audio>`;
    else if (current.sha256 && /^video\//i.test(current.mime_type)) preview = html`<video controls src="${here}/raw" class="preview-img"></video>`;
    else if (current.sha256 && text && Number(current.byte_size) <= MAX_PREVIEW_TEXT) {
      const content = (await readFileBytes(opened.ctx, current.sha256)).toString('utf8');
      preview = /\.(md|markdown)$/i.test(file.basename) ? html`<div class="markdown">${raw(md.render(content))}</div>` : html`<pre class="source" tabindex="0">${content}</pre>`;
    }

    let diff: Html = html``;
    const diffVersion = typeof req.query.diff === 'string' ? versions.find((v) => v.id === req.query.diff) : undefined;
    if (diffVersion && text) {
      const before = versions.find((v) => v.version_number < diffVersion.version_number && v.sha256);
      const read = async (sha: string | null | undefined) => (sha ? (await readFileBytes(opened.ctx, sha)).subarray(0, MAX_PREVIEW_TEXT).toString('utf8') : '');
      const lines = lineDiff(await read(before?.sha256), await read(diffVersion.sha256));
      diff = html`<div class="card" id="diff"><h2>Changes in version ${diffVersion.version_number}${before ? ` (from version ${before.version_number})` : ''}</h2>${
        lines
          ? html`<pre class="source diff" tabindex="0">${lines.map((l) => html`<span class="${l.op === '+' ? 'add' : l.op === '-' ? 'del' : ''}">${l.op} ${l.line}\n</span>`)}</pre>`
          : html`<p class="muted">Too large to compare here.</p>`
      }</div>`;
    }

    const versionRows = versions.map(
      (v) => html`<li><div class="main"><span class="title">Version ${v.version_number}${v.id === current.id ? html` <span class="tag ok">current</span>` : ''}${v.deleted ? html` <span class="tag bad">deleted</span>` : ''}</span>
<div class="small muted">${formatSize(Number(v.byte_size))} · ${v.reason ?? ''}</div></div>
<div class="side">${formatTime(v.created_at)}${text && !v.deleted ? html`<a href="${here}?diff=${v.id}#diff">Diff</a>` : ''}${
        canWrite && v.id !== current.id && !v.deleted
          ? html`<form class="inline" method="post" action="${here}/restore">${csrfInput(csrf)}<input type="hidden" name="version_id" value="${v.id}"><button class="secondary small" type="submit">Restore</button></form>`
          : ''
      }</div></li>`,
    );
    const folderOf = file.folder;
    const actions = canWrite
      ? html`<div class="card"><h2>Change</h2><div class="grid">
<form method="post" action="${here}/rename">${csrfInput(csrf)}<label for="f-rename">Rename</label><input id="f-rename" name="target" type="text" value="${file.basename}" required><div class="actions"><button class="secondary" type="submit">Rename</button></div></form>
<form method="post" action="${here}/move">${csrfInput(csrf)}<label for="f-move">Move to path</label><input id="f-move" name="target" type="text" value="${file.path}" required><div class="actions"><button class="secondary" type="submit">Move</button></div></form>
<form method="post" action="${here}/copy">${csrfInput(csrf)}<label for="f-copy">Copy to path</label><input id="f-copy" name="target" type="text" value="${folderOf ? `${folderOf}/` : ''}copy of ${file.basename}" required><div class="actions"><button class="secondary" type="submit">Copy</button></div></form>
${
  text
    ? html`<form method="post" action="${here}/append">${csrfInput(csrf)}<label for="f-append">Append text</label><textarea id="f-append" name="content" rows="3" required></textarea><div class="actions"><button class="secondary" type="submit">Append</button></div></form>`
    : ''
}
</div>
${canAdmin ? html`<form method="post" action="${here}/delete" class="actions">${csrfInput(csrf)}<button class="danger" type="submit">Delete file</button><span class="hint">Its versions stay in the history.</span></form>` : ''}
</div>`
      : '';
    const body = html`${mailboxHeader({ mailbox: m, tab: 'files', canWrite: mayChange(opened.loaded), canAdmin: mayChange(opened.loaded, 'admin'), csrf })}
${notice(req.query)}
${breadcrumbs(base, folderOf)}
<div class="head"><h2>${file.basename}${readOnly ? html` <span class="tag">read-only</span>` : ''}</h2><div class="actions">${link ? html`<a class="button" href="${link.url}">Download</a>` : ''}</div></div>
<div class="card"><p class="small muted"><code>${file.path}</code> · <code>${current.mime_type}</code> · ${formatSize(Number(current.byte_size))} · updated ${formatTime(current.created_at)}</p>${preview}</div>
${diff}
${actions}
<div class="card flush"><h2>Version history</h2><ul class="rows">${versionRows}</ul></div>`;
    return sendPage(reply, 200, layout({ title: `${file.basename} · ${mailboxName(m)}`, user: session.user, csrf, body, active: 'mailboxes' }));
  });

  // The bytes of the current version for previews on our pages, sandboxed: nothing in them runs.
  web.get('/mailboxes/:id/files/:file_id/raw', ROUTE, async (req: FastifyRequest<{ Params: FileParams }>, reply) => {
    const session = req.webSession;
    if (!session) return reply.code(401).send();
    const opened = await openMailbox(deps, req, session, req.params.id);
    const file = opened ? await loadOpenedFile(opened, req.params.file_id) : null;
    const v = file?.current_version_id ? await deps.db.selectFrom('file_versions').selectAll().where('id', '=', file.current_version_id).executeTakeFirst() : undefined;
    if (!opened || !v?.sha256) return reply.code(404).send();
    const type = /^(image|audio|video)\//i.test(v.mime_type) ? v.mime_type : 'text/plain; charset=utf-8';
    return reply
      .header('content-type', type)
      .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; sandbox")
      .header('content-disposition', 'inline')
      .header('cache-control', 'private, no-store')
      .header('x-content-type-options', 'nosniff')
      .send(await deps.blobs.read(v.sha256));
  });

  const fileAction = (name: string, run: (opened: OpenedMailbox, fileId: string, body: FormBody) => Promise<unknown>, done: string, after: (opened: OpenedMailbox, fileId: string, result: unknown) => string) =>
    web.post(`/mailboxes/:id/files/:file_id/${name}`, ROUTE, async (req: FastifyRequest<{ Params: FileParams }>, reply) => {
      const session = req.webSession;
      if (!session) return toSignIn(req, reply);
      const opened = await openMailbox(deps, req, session, req.params.id);
      if (!opened) return notFound(reply, 'Mailbox', undefined, session);
      const base = mailboxBase(opened.loaded.mailbox);
      const result = await attempt(() => run(opened, req.params.file_id, req.body as FormBody));
      if (!result.ok) return refusalPage(req, reply, deps, session, result.error, { href: `${base}/files/${encodeURIComponent(req.params.file_id)}`, text: 'Back to the file' });
      const target = after(opened, req.params.file_id, result.value);
      return reply.redirect(`${target}${target.includes('?') ? '&' : '?'}done=${done}`, 303);
    });
  const input = (o: OpenedMailbox, fileId: string) => ({ accountId: o.loaded.access.account.id, mailboxId: o.loaded.mailbox.id, fileId });
  const fileHref = (o: OpenedMailbox, fileId: string) => `${mailboxBase(o.loaded.mailbox)}/files/${encodeURIComponent(fileId)}`;
  for (const kind of ['rename', 'move'] as const) fileAction(kind, (o, id, b) => relocateFile(o.ctx, kind, { ...input(o, id), target: formField(b, 'target', 1024).trim() }), 'moved', fileHref);
  fileAction('copy', (o, id, b) => relocateFile(o.ctx, 'copy', { ...input(o, id), target: formField(b, 'target', 1024).trim() }), 'moved', (o, id, r) => fileHref(o, (r as { file?: { id: string } }).file?.id ?? id));
  fileAction('delete', (o, id) => deleteFile(o.ctx, input(o, id)), 'file_deleted', (o) => `${mailboxBase(o.loaded.mailbox)}/files`);
  fileAction('restore', (o, id, b) => restoreVersion(o.ctx, { ...input(o, id), versionId: formField(b, 'version_id', 100) }), 'restored', fileHref);
  fileAction(
    'append',
    async (o, id, b) => {
      const { file } = await loadFile(o.ctx, o.loaded.access.account.id, o.loaded.mailbox.id, id, 'write');
      return appendText(o.ctx, { accountId: o.loaded.access.account.id, mailboxId: o.loaded.mailbox.id, path: file.path, content: formField(b, 'content', 1024 * 1024), newlineBefore: true });
    },
    'appended',
    fileHref,
  );
}
