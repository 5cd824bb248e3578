import { randomUUID } from 'node:crypto';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import { InvalidGrantError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type {
  OAuthClientInformationFull,
  OAuthTokenRevocationRequest,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Response } from 'express';
import {
  codeChallengeFor,
  completeClientMetadata,
  exchangeCode,
  findAccessToken,
  findClient,
  type McpScope,
  revokeToken,
  rotateRefreshToken,
  storeClient,
} from '../../shared/services/oauth.ts';
import type { ApiDeps } from '../deps.ts';
import { beginAuthorization } from './authorize-page.ts';

/** What an access token carries into tool calls (`AuthInfo.extra`). */
export interface McpGrant {
  email: string;
  clientName: string | null;
  authorizationId: string;
  scopes: McpScope[];
}

export function grantOf(auth: AuthInfo | undefined): (McpGrant & { clientId: string }) | null {
  const extra = auth?.extra as Partial<McpGrant> | undefined;
  if (!auth || !extra?.email || !extra.authorizationId) return null;
  return {
    clientId: auth.clientId,
    email: extra.email,
    clientName: extra.clientName ?? null,
    authorizationId: extra.authorizationId,
    scopes: auth.scopes as McpScope[],
  };
}

/**
 * The SDK's `OAuthServerProvider`, backed by Postgres (`shared/services/oauth.ts`): the SDK's
 * handlers do the protocol (request parsing and validation, PKCE S256 verification, error
 * responses), this does the storage and the policy, and the authorization page does the
 * passenger's part.
 *
 * Client secrets are stored hashed, so `getClient` never returns one: the router checks
 * secrets (`client_secret_post` and `client_secret_basic`) before the SDK's token and
 * revocation handlers, whose own check compares a stored plaintext secret.
 */
export class PgOAuthProvider implements OAuthServerProvider {
  readonly clientsStore: OAuthRegisteredClientsStore;

  constructor(private readonly deps: ApiDeps) {
    this.clientsStore = {
      getClient: (clientId) => findClient(deps.db, clientId),
      registerClient: async (client) => {
        const full = completeClientMetadata({
          ...client,
          client_id: (client as Partial<OAuthClientInformationFull>).client_id ?? randomUUID(),
          client_id_issued_at:
            (client as Partial<OAuthClientInformationFull>).client_id_issued_at ?? Math.floor(Date.now() / 1000),
        });
        await storeClient(deps.db, full);
        return full;
      },
    };
  }

  private get ttl() {
    return this.deps.config.mcp;
  }

  authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response): Promise<void> {
    return beginAuthorization(this.deps, client, params, res);
  }

  async challengeForAuthorizationCode(client: OAuthClientInformationFull, code: string): Promise<string> {
    const challenge = await codeChallengeFor(this.deps.db, client.client_id, code);
    if (!challenge) throw new InvalidGrantError('The authorization code is not valid.');
    return challenge;
  }

  exchangeAuthorizationCode(
    client: OAuthClientInformationFull,
    code: string,
    _codeVerifier?: string,
    redirectUri?: string,
    resource?: URL,
  ): Promise<OAuthTokens> {
    return exchangeCode(this.deps.db, this.ttl, {
      clientId: client.client_id,
      code,
      ...(redirectUri !== undefined ? { redirectUri } : {}),
      ...(resource !== undefined ? { resource: resource.href } : {}),
    });
  }

  exchangeRefreshToken(
    client: OAuthClientInformationFull,
    refreshToken: string,
    scopes?: string[],
    resource?: URL,
  ): Promise<OAuthTokens> {
    return rotateRefreshToken(this.deps.db, this.ttl, {
      clientId: client.client_id,
      refreshToken,
      ...(scopes !== undefined ? { scopes } : {}),
      ...(resource !== undefined ? { resource: resource.href } : {}),
    });
  }

  async verifyAccessToken(token: string): Promise<AuthInfo> {
    const grant = await findAccessToken(this.deps.db, token);
    if (!grant) throw new InvalidTokenError('The access token is not valid: unknown, expired or revoked.');
    return {
      token,
      clientId: grant.clientId,
      scopes: grant.scopes,
      expiresAt: Math.floor(grant.expiresAt.getTime() / 1000),
      resource: new URL(grant.resource),
      extra: {
        email: grant.email,
        clientName: grant.clientName,
        authorizationId: grant.authorizationId,
        scopes: grant.scopes,
      } satisfies McpGrant,
    };
  }

  revokeToken(client: OAuthClientInformationFull, request: OAuthTokenRevocationRequest): Promise<void> {
    return revokeToken(this.deps.db, client.client_id, request.token);
  }
}
