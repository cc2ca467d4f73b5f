// Row types of the live-subscription tables (migration 0007_webhooks_live), added to the DB interface.

/** A subscription ticket: 60 seconds, single use, bound to the key, account and mailbox; stored hashed. */
export interface LiveTokensTable {
  token_hash: string;
  api_key_id: string;
  user_id: string;
  account_id: string;
  mailbox_id: string;
  created_at: string;
  expires_at: string;
  used_at: string | null;
}

/** Open WebSocket connections on every node, for the per-credential connection limit. */
export interface LiveConnectionsTable {
  id: string;
  api_key_id: string;
  mailbox_id: string;
  node_id: string;
  connected_at: string;
  /** Refreshed while the connection is open; rows of a node that died go stale and stop counting. */
  seen_at: string;
}

declare module '../db/schema.ts' {
  interface DB {
    live_tokens: LiveTokensTable;
    live_connections: LiveConnectionsTable;
  }
}
