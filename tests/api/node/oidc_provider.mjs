// A real OpenID Connect provider for the tests: panva's certified
// oidc-provider on 127.0.0.1 at a port of the kernel's, printed on the first
// line (tests/support/script_server.h). One client, `ductus`, with the
// secret and the redirect URI given as arguments, PKCE required. Its own
// development sign-in pages take any name (no password check); the ID
// token carries preferred_username = the name and groups:
//   olivia: [ductus-operators]   adam: [ductus-admins, ductus-operators]
//   anyone else: [nurses]
//
//   node oidc_provider.mjs REDIRECT_URI CLIENT_SECRET
import { createServer } from 'node:http';
import Provider from 'oidc-provider';

const [redirectUri, clientSecret] = process.argv.slice(2);
if (!redirectUri || !clientSecret) {
  console.error('usage: node oidc_provider.mjs REDIRECT_URI CLIENT_SECRET');
  process.exit(2);
}

const groupsOf = (name) =>
  name === 'olivia' ? ['ductus-operators'] : name === 'adam' ? ['ductus-admins', 'ductus-operators'] : ['nurses'];

const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const provider = new Provider(`http://127.0.0.1:${port}`, {
    clients: [
      {
        client_id: 'ductus',
        client_secret: clientSecret,
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    pkce: { required: () => true },
    scopes: ['openid', 'profile', 'groups'],
    claims: { openid: ['sub'], profile: ['preferred_username', 'name'], groups: ['groups'] },
    // The profile's claims in the ID token itself, as Keycloak and Entra
    // ID put them, not only behind the userinfo endpoint.
    conformIdTokenClaims: false,
    findAccount: async (ctx, sub) => ({
      accountId: sub,
      claims: async () => ({ sub, preferred_username: sub, name: sub, groups: groupsOf(sub) }),
    }),
    features: { devInteractions: { enabled: true } },
    cookies: { keys: ['ductus-test-cookie-key'] },
  });
  provider.proxy = false;
  server.on('request', provider.callback());
  console.log(port);
  // The harness reads the first line and closes its end.
  process.stdout.on('error', () => {});
});
