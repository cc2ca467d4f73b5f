import type { AppDeps } from '../context.ts';
import { DEVICE_GRANT } from './clients.service.ts';
import { issuer, MCP_SCOPE, mcpResource, OFFLINE_SCOPE } from './oauth.http.ts';

/** Authorization server metadata (RFC 8414). */
export function authorizationServerMetadata(deps: AppDeps) {
  const base = issuer(deps);
  return {
    issuer: base,
    authorization_endpoint: `${base}/oauth/authorize`,
    token_endpoint: `${base}/oauth/token`,
    registration_endpoint: `${base}/oauth/register`,
    revocation_endpoint: `${base}/oauth/revoke`,
    device_authorization_endpoint: `${base}/oauth/device_authorization`,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token', DEVICE_GRANT],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
    revocation_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
    scopes_supported: [MCP_SCOPE, OFFLINE_SCOPE, ...deps.config.compatBrands.map((b) => `${b}:mcp`)],
    authorization_response_iss_parameter_supported: true,
    service_documentation: `${base}/docs/agent-access`,
  };
}

/** Protected resource metadata for the MCP endpoint (RFC 9728). */
export function protectedResourceMetadata(deps: AppDeps) {
  return {
    resource: mcpResource(deps),
    authorization_servers: [issuer(deps)],
    scopes_supported: [MCP_SCOPE, OFFLINE_SCOPE, ...deps.config.compatBrands.map((b) => `${b}:mcp`)],
    bearer_methods_supported: ['header'],
    resource_name: 'Cubby',
    resource_documentation: `${deps.publicUrl()}/docs/agent-access`,
  };
}
