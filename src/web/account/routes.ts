import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../context.ts';
import { registerInvitationPages } from './invitations.pages.ts';
import { registerActivityPages } from './activity.pages.ts';
import { registerDomainPages } from './domains.pages.ts';
import { registerClientPages } from './clients.pages.ts';
import { registerLogoPages } from './logo.pages.ts';
import { registerMemberPages } from './members.pages.ts';
import { registerOverviewPage } from './overview.pages.ts';
import { registerSecurityPages } from './security.pages.ts';
import { registerTwoFactorPages } from './two-factor.pages.ts';

/** The account pages: /account/*, invitation and confirmation links. */
export function registerAccountPages(web: FastifyInstance, deps: AppDeps): void {
  registerInvitationPages(web, deps);
  registerMemberPages(web, deps);
  registerOverviewPage(web, deps);
  registerSecurityPages(web, deps);
  registerTwoFactorPages(web, deps);
  registerActivityPages(web, deps);
  registerDomainPages(web, deps);
  registerClientPages(web, deps);
  registerLogoPages(web, deps);
}
