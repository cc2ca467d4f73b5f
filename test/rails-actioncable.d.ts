// The parts of the stock ActionCable client (@rails/actioncable, no bundled types) the live tests use.
declare module '@rails/actioncable' {
  export const adapters: { WebSocket: unknown; logger: unknown };
  export interface Subscription {
    unsubscribe(): void;
  }
  export interface Consumer {
    subscriptions: { create(params: Record<string, unknown>, mixin: Record<string, (...args: any[]) => unknown>): Subscription };
    disconnect(): void;
  }
  export function createConsumer(url?: string): Consumer;
}
