import { z } from 'zod';
import websocket from '@fastify/websocket';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { WebSocket } from 'ws';
import type { AppDeps } from '../context.ts';
import type { LiveHub } from './hub.ts';
import { accountIdField, reasonField } from '../http/schemas.ts';
import { reasonOf } from '../mailboxes/mailboxes.routes.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { eventsId } from '../events/ids.ts';
import { AppError } from '../errors.ts';
import { okR, responsesR } from '../http/contract.ts';
import { LiveSubscription } from './live.responses.ts';
import { checkLiveAccess } from './access.ts';
import { consumeLiveToken, issueLiveToken, LIVE_TOKEN_TTL_S } from './tokens.ts';
import { CableConnection, CHANNEL, SUBPROTOCOL, type DisconnectReason } from './cable.ts';

// The live subscription: GET …/email/subscription (surface R, read permission) hands out a ticket;
// the WebSocket endpoint /cable takes it (`?email_subscription_token=`) and speaks ActionCable.

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;

/** ws(s)://<public base>/cable */
export function websocketUrl(publicUrl: string): string {
  const u = new URL('/cable', publicUrl);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.href;
}

export function registerLiveRoutesR(app: App) {
  app.get(
    '/mailboxes/:mailbox_id/email/subscription',
    {
      schema: {
        operationId: 'createEmailSubscription',
        response: responsesR({ 200: okR(z.object({ subscription: LiveSubscription })) }, ['MAILBOX_NOT_FOUND']),
        tags: ['email settings'],
        summary: 'A 60-second, single-use ticket for the live EmailReceivedChannel (connect to websocket_url?email_subscription_token=…); catch up with the ascending email list after every connect',
        params: z.object({ mailbox_id: z.string().min(1).max(100) }),
        querystring: z.object({ account_id: accountIdField, reason: reasonField }),
      },
    },
    async (req) => {
      reasonOf(req);
      const ctx = req.ctx;
      const { mailbox } = await loadMailbox(ctx, req.query.account_id, req.params.mailbox_id, 'read');
      const { token } = await issueLiveToken(ctx.db, { apiKeyId: ctx.credential.keyId, userId: ctx.credential.user.id, accountId: mailbox.account_id, mailboxId: mailbox.id }, ctx.now());
      return {
        success: true,
        data: {
          subscription: { token, expires_in: LIVE_TOKEN_TTL_S, channel: CHANNEL, account_id: mailbox.account_id, mailbox_id: mailbox.id, websocket_url: websocketUrl(ctx.publicUrl()) },
        },
      };
    },
  );
}

/** The WebSocket endpoint, on the API listener (no API key: the ticket is the credential). */
export async function registerCable(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const hub = deps.events?.live;
  if (!hub) return;
  await app.register(async (scope) => {
    await scope.register(websocket, {
      options: {
        // Larger frames are cut off by ws itself; the connection answers oversized commands politely below this.
        maxPayload: hub.settings.maxCommandBytes * 4,
        handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
      },
    });
    scope.route({
      method: 'GET',
      url: '/cable',
      schema: { hide: true },
      config: { auth: false },
      // A plain HTTP request gets the JSON 404 every unknown route gets, with a hint.
      handler: async () => {
        throw new AppError('NOT_FOUND', 'GET /cable is the live subscription WebSocket endpoint: connect with subprotocol actioncable-v1-json and ?email_subscription_token=.');
      },
      wsHandler: (socket, req) => {
        const token = (req.query as Record<string, unknown>)?.email_subscription_token;
        void openCable(deps, hub, socket, typeof token === 'string' ? token : undefined);
      },
    });
  });
}

const OPEN = 1;

async function openCable(deps: AppDeps, hub: LiveHub, socket: WebSocket, token: string | undefined): Promise<void> {
  // Frames that arrive while the ticket is checked wait (a client sends nothing before welcome, but may).
  const early: [Buffer, boolean][] = [];
  let conn: CableConnection | null = null;
  socket.on('message', (data: Buffer, isBinary: boolean) => {
    if (conn) conn.receive(data, isBinary);
    else if (early.length < hub.settings.commandBurst) early.push([data, isBinary]);
  });
  socket.on('close', () => conn?.gone());
  socket.on('error', () => socket.terminate());
  const refuse = (reason: DisconnectReason) => {
    if (socket.readyState === OPEN) socket.send(JSON.stringify({ type: 'disconnect', reason, reconnect: false }));
    socket.close(1000, reason);
  };
  try {
    const binding = await consumeLiveToken(deps.db, token, deps.now());
    if (!binding) return refuse('unauthorized');
    const [verdict] = await checkLiveAccess(deps.db, [binding], deps.now());
    if (!verdict!.ok) return refuse('unauthorized');
    if ((await hub.countConnections(binding.apiKeyId)) >= hub.settings.maxConnectionsPerKey) return refuse('too_many_connections');
    const c = new CableConnection(eventsId('cbl'), socket, binding, hub.settings, (x) => hub.remove(x));
    await hub.register(c);
    if (socket.readyState !== OPEN) return hub.remove(c);
    hub.add(c);
    conn = c;
    socket.send(JSON.stringify({ type: 'welcome' }));
    for (const [data, isBinary] of early.splice(0)) c.receive(data, isBinary);
  } catch (err) {
    hub.opts.log.error({ err }, 'opening a live connection failed');
    socket.close(1011, 'server_error');
  }
}
