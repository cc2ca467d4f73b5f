import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/server';
import { UNTRUSTED } from './tool.ts';

// MCP prompts: short, reusable task openers a person can pick in their client. They only
// describe the work; every step runs through the tools, with the connection's own permissions.

const id = z.string().min(1).max(100);

function user(text: string) {
  return { messages: [{ role: 'user' as const, content: { type: 'text' as const, text } }] };
}

export function registerPrompts(server: McpServer): void {
  server.registerPrompt(
    'triage_new_mail',
    { title: 'Triage new mail', description: 'Go through unread email of a mailbox and sort it into what needs a reply, what is informational and what is junk.', argsSchema: z.object({ mailbox_id: id.describe('bkt_… id of the mailbox') }) },
    ({ mailbox_id }) =>
      user(
        `Triage the unread email of mailbox ${mailbox_id}. List it with email_list (mailbox_id=${mailbox_id}, read=false, direction=received), read each with email_get, and give me three groups: needs a reply (with a one-line suggestion), informational, and likely junk. Do not send anything, and mark an email read only when I say so. ${UNTRUSTED}`,
      ),
  );

  server.registerPrompt(
    'summarize_conversation',
    {
      title: 'Summarize a conversation',
      description: 'Summarize one email thread: who said what, decisions, open questions.',
      argsSchema: z.object({ mailbox_id: id.describe('bkt_… id of the mailbox'), conversation_id: id.describe('conversation_id of any email in the thread') }),
    },
    ({ mailbox_id, conversation_id }) =>
      user(
        `Summarize the conversation ${conversation_id} in mailbox ${mailbox_id}. List its emails with email_list (mailbox_id=${mailbox_id}, conversation_id=${conversation_id}, order=asc), read each with email_get, and give me: the participants, a short chronological summary, decisions made, and open questions. ${UNTRUSTED}`,
      ),
  );

  server.registerPrompt(
    'publish_folder',
    {
      title: 'Publish a folder',
      description: 'Check a folder of a mailbox and publish it as the website root.',
      argsSchema: z.object({ mailbox_id: id.describe('bkt_… id of the mailbox'), folder: z.string().max(1024).describe('The folder to check, e.g. site') }),
    },
    ({ mailbox_id, folder }) =>
      user(
        `Prepare mailbox ${mailbox_id} for publishing: list the files of folder "${folder}" with mailbox_file_list, check that an index.html exists and that no file looks private (secrets, personal data, anything under _email/), and tell me what you found. Only after I confirm, publish with bucket_publish (bucket_id=${mailbox_id}, publication_root_directory="${folder}") and poll publication_status until it is ready or failed; then give me the public_url.`,
      ),
  );
}
