import { z } from 'zod';
import { named } from '../http/contract.ts';

// Response schema of the live subscription ticket (surface R).

export const LiveSubscription = named(
  'LiveSubscription',
  z.object({
    token: z.string().describe('Single use; valid for expires_in seconds'),
    expires_in: z.number().int(),
    channel: z.string(),
    account_id: z.string(),
    mailbox_id: z.string(),
    websocket_url: z.string(),
  }),
  'A ticket for the live EmailReceivedChannel (ActionCable over WebSocket).',
);
