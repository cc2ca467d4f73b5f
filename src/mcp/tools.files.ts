import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/server';
import type { RequestCtx } from '../context.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { appendText, loadFile, readFileBytes, relocateFile, writeTextFile } from '../files/files.service.ts';
import { listFiles, listVersions } from '../files/files.list.ts';
import { presentFiles, presentOneFile, presentVersions } from '../files/files.present.ts';
import { findFileByPath } from '../files/files.repo.ts';
import { cleanPath } from '../files/paths.ts';
import { downloadLink } from '../files/blob.routes.ts';
import { assertEmailFileReadable } from '../emails/withheld.ts';
import { presentWrite } from '../files/files.routes.ts';
import { addTool, UNTRUSTED } from './tool.ts';

// Files: the same service calls as /v1/mailboxes/{id}/files. Writes are text-only here;
// binary files go through the HTTP upload API or the CLI.

const mailboxId = z.string().min(1).max(100).describe('bkt_… id of the mailbox');
const fileId = z.string().min(1).max(100).describe('df_… id of the file');
const expected = z.string().max(100).nullable().optional().describe('Current mailbox version_id; a different one refuses the change (MAILBOX_VERSION_CONFLICT)');
/** Text shown inline up to this size; larger or binary files come as a download link. */
const INLINE_MAX_BYTES = 256 * 1024;

function isTextType(mime: string): boolean {
  const m = mime.toLowerCase();
  return m.startsWith('text/') || /^application\/(json|xml|javascript|yaml|x-yaml|toml|x-ndjson|ld\+json|[\w.+-]+\+(json|xml))\b/.test(m) || m.startsWith('image/svg+xml');
}

/**
 * A file's metadata and its text when small and UTF-8, else a temporary download link: what the
 * read tool and the file resources return. `_email/` files of withheld mail are refused.
 */
export async function readFileForAgent(c: RequestCtx, a: { accountId?: string; mailboxId: string; path?: string; fileId?: string }): Promise<Record<string, unknown>> {
  let file;
  if (a.fileId) file = (await loadFile(c, a.accountId, a.mailboxId, a.fileId)).file;
  else if (a.path) {
    const { mailbox } = await loadMailbox(c, a.accountId, a.mailboxId, 'read');
    const p = cleanPath(a.path, 'path', { allowEmail: true });
    file = await findFileByPath(c.db, mailbox.id, p.path);
    if (!file) throw new AppError('MAILBOX_FILE_NOT_FOUND', `No file at ${p.path}.`, { path: p.path });
    await assertEmailFileReadable(c, mailbox.id, file.path);
  } else throw invalidArgument('path', 'give path or file_id');
  const v = await c.db.selectFrom('file_versions').selectAll().where('id', '=', file.current_version_id!).executeTakeFirstOrThrow();
  const out: Record<string, unknown> = { file: await presentOneFile(c.db, file) };
  if (v.sha256 && isTextType(v.mime_type) && Number(v.byte_size) <= INLINE_MAX_BYTES) {
    try {
      out.content = new TextDecoder('utf-8', { fatal: true }).decode(await readFileBytes(c, v.sha256));
      out.encoding = 'utf-8';
      return out;
    } catch {
      // Not valid UTF-8 after all: fall through to a link.
    }
  }
  out.download = await downloadLink(c, { sha256: v.sha256!, filename: v.name, contentType: v.mime_type, byteSize: Number(v.byte_size) });
  return out;
}

export function fileTools(server: McpServer, ctx: RequestCtx): void {
  addTool(server, ctx, 'mailbox_file_list', {
    title: 'List files',
    description: `Files of a mailbox, including received email under _email/. Never marks anything read. ${UNTRUSTED}`,
    input: { mailbox_id: mailboxId, q: z.string().max(200).optional().describe('Text in the path'), folder: z.string().max(1024).optional().describe('Only this folder; empty string for the root'), limit: z.number().int().min(1).max(100).optional(), cursor: z.string().max(2048).optional() },
    readOnly: true,
    run: async (c, a) => {
      const p = await listFiles(c, { accountId: a.account_id, mailboxId: a.mailbox_id, q: a.q, folder: a.folder, limit: a.limit ?? 50, cursor: a.cursor });
      return { files: await presentFiles(c.db, p.items), pagination: p.pagination };
    },
  });

  addTool(server, ctx, 'mailbox_file_read', {
    title: 'Read a file',
    description: `A file's metadata and, for text up to 256 KiB, its content; other files come with a temporary download link. Give path or file_id. ${UNTRUSTED}`,
    input: { mailbox_id: mailboxId, path: z.string().max(2048).optional(), file_id: fileId.optional() },
    readOnly: true,
    run: (c, a) => readFileForAgent(c, { accountId: a.account_id, mailboxId: a.mailbox_id, path: a.path, fileId: a.file_id }),
  });

  addTool(server, ctx, 'mailbox_file_write', {
    title: 'Write a text file',
    description: 'Writes UTF-8 text at a path: a new file, or a new version of an existing one. Text only (up to 1 MiB); upload binary files through the HTTP API or the CLI. Paths under _email/ are read-only.',
    input: { mailbox_id: mailboxId, path: z.string().min(1).max(2048), content: z.string(), expected_mailbox_version: expected },
    run: async (c, a) => presentWrite(c, await writeTextFile(c, { accountId: a.account_id, mailboxId: a.mailbox_id, path: a.path, content: a.content, expectedMailboxVersion: a.expected_mailbox_version, reason: a.reason })),
  });

  addTool(server, ctx, 'mailbox_file_append', {
    title: 'Append text to a file',
    description: 'Appends UTF-8 text to an existing file as a new version.',
    input: { mailbox_id: mailboxId, path: z.string().min(1).max(2048), content: z.string(), newline_before: z.boolean().optional(), expected_mailbox_version: expected },
    run: async (c, a) => {
      const r = await appendText(c, { accountId: a.account_id, mailboxId: a.mailbox_id, path: a.path, content: a.content, newlineBefore: a.newline_before, expectedMailboxVersion: a.expected_mailbox_version, reason: a.reason });
      const { file, version } = await presentWrite(c, r);
      return { file, version, path: r.path, appended: true, appended_bytes: r.appended_bytes, newline_inserted: r.newline_inserted };
    },
  });

  for (const kind of ['rename', 'move', 'copy'] as const) {
    const field = kind === 'rename' ? 'name' : 'path';
    addTool(server, ctx, `mailbox_file_${kind}`, {
      title: kind === 'rename' ? 'Rename a file' : kind === 'move' ? 'Move a file' : 'Copy a file',
      description: kind === 'rename' ? 'Renames a file within its folder (name without slashes).' : kind === 'move' ? 'Moves a file to another path, keeping its history.' : 'Copies a file to a new path.',
      input: { mailbox_id: mailboxId, file_id: fileId, [field]: z.string().min(1).max(2048), expected_mailbox_version: expected } as { mailbox_id: typeof mailboxId; file_id: typeof fileId; name: z.ZodString; path: z.ZodString; expected_mailbox_version: typeof expected },
      run: async (c, a) => {
        const target = (a as Record<string, unknown>)[field] as string;
        return presentWrite(c, await relocateFile(c, kind, { accountId: a.account_id, mailboxId: a.mailbox_id, fileId: a.file_id, target, expectedMailboxVersion: a.expected_mailbox_version, reason: a.reason }));
      },
    });
  }

  addTool(server, ctx, 'mailbox_file_versions', {
    title: 'File versions',
    description: 'Versions of a file, newest first, with who made each and why.',
    input: { mailbox_id: mailboxId, file_id: fileId, limit: z.number().int().min(1).max(100).optional(), cursor: z.string().max(2048).optional() },
    readOnly: true,
    run: async (c, a) => {
      const { file } = await loadFile(c, a.account_id, a.mailbox_id, a.file_id);
      const p = await listVersions(c, { fileId: file.id, mailboxId: file.mailbox_id, limit: a.limit ?? 50, cursor: a.cursor });
      return { versions: await presentVersions(c.db, p.items), pagination: p.pagination };
    },
  });
}
