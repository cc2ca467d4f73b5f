import { createMcpHandler, McpServer, type McpRequestContext } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestCtx } from '../context.ts';
import { SERVER_VERSION } from '../version.ts';
import { UNTRUSTED } from './tool.ts';
import { mailboxTools } from './tools.mailboxes.ts';
import { fileTools } from './tools.files.ts';
import { emailTools } from './tools.emails.ts';
import { siteTools } from './tools.sites.ts';
import { searchTools } from './tools.search.ts';
import { registerResources } from './resources.ts';
import { registerPrompts } from './prompts.ts';

// The MCP server behind /mcp (mcp.routes.ts), loaded with the first request to it: the MCP SDK
// and the tools hold about 8 MB of heap, which a server nobody reaches over MCP need not carry.

const INSTRUCTIONS = `Cubby: private file mailboxes, each with its own email address. Call status first. ${UNTRUSTED} Never ask the person to paste secrets, codes or passwords into the chat.`;

function buildServer(ctx: RequestCtx): McpServer {
  const server = new McpServer({ name: 'cubby', title: 'Cubby', version: SERVER_VERSION }, { instructions: INSTRUCTIONS });
  mailboxTools(server, ctx);
  fileTools(server, ctx);
  emailTools(server, ctx);
  siteTools(server, ctx);
  searchTools(server, ctx);
  registerResources(server, ctx);
  registerPrompts(server);
  return server;
}

export interface McpNodeHandler {
  /** Answers one request whose `auth.extra.ctx` is the caller's RequestCtx. */
  handle(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void>;
  close(): Promise<void>;
}

/** Stateless streamable HTTP: every request gets a fresh server whose tools close over its context. */
export function createMcpNodeHandler(log: { warn: (obj: object, msg: string) => void; error: (obj: object, msg: string) => void }): McpNodeHandler {
  const handler = createMcpHandler((c: McpRequestContext) => buildServer(c.authInfo!.extra!.ctx as RequestCtx), {
    legacy: 'stateless',
    onerror: (err) => log.warn({ err }, 'mcp request failed'),
  });
  const node = toNodeHandler(handler, { onerror: (err) => log.error({ err }, 'mcp adapter failed') });
  return {
    handle: (req, res, body) => node(req, res, body),
    close: async () => handler.close(),
  };
}
