import { createRequire } from 'node:module';

const pkg = createRequire(import.meta.url)('../package.json') as { version: string };
/** This server's release. */
export const SERVER_VERSION = pkg.version;
/** The current CLI/connector release clients compare against. */
export const CLIENT_VERSION = pkg.version;
