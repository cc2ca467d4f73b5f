import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { SMTPConnection } from 'smtp-server/lib/smtp-connection.js';
import type { AddressInfo, Socket } from 'node:net';
import { randomLabel } from '../ids.ts';
import { dataScanApplies, ScanningSmtpConnection } from './smtp-data-scan.ts';

/** The connection class: ours (the end-of-DATA scan in native code) while the library's replaced methods are the ones it was written against. */
const Connection = dataScanApplies() ? ScanningSmtpConnection : SMTPConnection;

/**
 * smtp-server always waits 100 ms before its greeting (to catch clients that talk first, a
 * spam-bot habit). MTAs open one connection per message, so that pause alone capped inbound
 * mail near 185 messages/s on one connection slot per sender. Here the pause is ours to set:
 * 0 greets at once; a positive delay keeps the early-talker check ("421 You talk too soon").
 */
export class GreetingSmtpServer extends SMTPServer {
  /** The address and port every connection arrives on, when the listener is bound to one address (not 0.0.0.0 or ::). */
  private bound: { localAddress: string; localPort: number } | undefined;

  constructor(
    options: SMTPServerOptions,
    private readonly greetingDelayMs: number,
  ) {
    super(options);
    const listener = (this as unknown as { server: import('node:net').Server }).server;
    listener.on('listening', () => {
      const info = listener.address() as AddressInfo | null;
      this.bound = info && info.address !== '0.0.0.0' && info.address !== '::' ? { localAddress: info.address, localPort: info.port } : undefined;
    });
  }

  // The library hands every connection on with setImmediate (for its PROXY-header path): under
  // load the greeting then waits behind everything else queued for that turn of the event loop,
  // a group commit included. Without a PROXY header the same options are handed on at once.
  // Two of the library's per-connection costs are ours to save: its session id is drawn from
  // OpenSSL (randomBytes(10): 8 µs alone, up to 40 µs under load here, and a getpid), and its local
  // address and port asked of the kernel (getsockname) even when the listener is bound to one
  // address. On a virtual machine every system call leaves the guest.
  override _handleProxy(socket: Socket, callback: Parameters<SMTPServer['_handleProxy']>[1]): void {
    if (this._expectsProxyHeader(socket)) return super._handleProxy(socket, callback);
    const ignored = this.options.ignoredHosts;
    callback(null, {
      ignore: !!ignored && ignored.includes(socket.remoteAddress!),
      id: randomLabel(16),
      ...this.bound,
    } as Parameters<typeof callback>[1]);
  }

  override connect(socket: Socket, socketOptions?: ConstructorParameters<typeof SMTPConnection>[2]): void {
    const connection = new Connection(this, socket, socketOptions) as SMTPConnection & ConnectionInternals;
    this.connections.add(connection);
    connection.on('error', (err: Error) => (this as unknown as ServerInternals)._onError(err));
    connection.on('connect', (data: unknown) => (this as unknown as ServerInternals)._onClientConnect(data));
    const delay = this.greetingDelayMs;
    // The library's init(), with our delay in place of its fixed 100 ms.
    connection._setListeners(() => {
      const max = this.options.maxClients;
      if (max && this.connections.size > max) return connection.send(421, `${connection.name} Too many connected clients, try again in a moment`, false);
      if (delay <= 0) return connection.connectionReady();
      setTimeout(() => connection.connectionReady(), delay).unref();
    });
  }
}

interface ConnectionInternals {
  name: string;
  _setListeners(callback: () => void): void;
  connectionReady(): void;
  send(code: number, message: string, command: string | false): void;
}

interface ServerInternals {
  _onError(err: Error): void;
  _onClientConnect(data: unknown): void;
}
