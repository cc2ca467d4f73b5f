import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../context.ts';
import { registerOAuthRoutes } from '../oauth/oauth.routes.ts';
import { registerMcp } from '../mcp/mcp.routes.ts';
import { registerApprovalPages } from '../oauth/approve.pages.ts';
import { registerConnectionPages } from './connections.pages.ts';
import { registerLoginLinkPage } from './login-links.ts';
export { registerAgentAuthRoutesA, registerAgentAuthRoutesR } from './agent-auth.routes.ts';
export { registerAgentAccessTasks } from './tasks.ts';

// Entry points of agent access, so that the shared server files each need one line:
// the OAuth server and MCP endpoint at the top level, the dashboard pages in the web scope.

export async function registerAgentAccess(app: FastifyInstance, deps: AppDeps): Promise<void> {
  await registerOAuthRoutes(app, deps);
  await registerMcp(app, deps);
}

export function registerAgentAccessPages(web: FastifyInstance, deps: AppDeps): void {
  registerApprovalPages(web, deps);
  registerConnectionPages(web, deps);
  registerLoginLinkPage(web, deps);
}
