import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../context.ts';

export async function registerWeb(app: FastifyInstance, _deps: AppDeps): Promise<void> {
  app.get('/', { schema: { hide: true }, config: { auth: false } }, async (_req, reply) =>
    reply.type('text/html; charset=utf-8').send('<!doctype html><title>Cubby</title><h1>Cubby</h1>'),
  );
}
