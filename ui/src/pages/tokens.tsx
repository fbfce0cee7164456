import { useState } from 'preact/hooks';
import { GrantFields, noGrant, permissionsOf, type Grant } from '../components/grant';
import { call, type Answer } from '../api/client';
import { Confirm, ErrorNote, Notice, Page, When, useApi } from '../components/ui';
import { me } from '../session';
import { useStore } from '../store';

type TokenRow = NonNullable<Answer<'/api/v1/tokens'>['items']>[number];

/** Mine only, or every token (the admin's page of users and tokens). */
export function TokenTable({ mine, title }: { mine: boolean; title: string }) {
  const who = useStore(me);
  const [revoked, setRevoked] = useState(false);
  // Mine: the /me routes, which every role may use (a token never has
  // more than its user); every token: the admin's.
  const query = { revoked: revoked ? 'true' : undefined };
  const list = useApi(() => (mine ? call('get', '/api/v1/me/tokens', { query }) : call('get', '/api/v1/tokens', { query })), [revoked, mine]);
  const [revoking, setRevoking] = useState<TokenRow | null>(null);
  const [created, setCreated] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const items = (list.data?.items ?? []).filter((t) => !mine || t.user === who?.name);
  return (
    <section aria-labelledby="tokens-h">
      <h2 id="tokens-h">{title}</h2>
      <ErrorNote message={list.error} />
      <Notice message={notice} />
      {created && (
        <div class="note ok" role="status">
          <p>The new token, shown this once: copy it now.</p>
          <code class="secret">{created}</code>
        </div>
      )}
      <label class="inline">
        <input type="checkbox" checked={revoked} onChange={() => setRevoked(!revoked)} /> Show revoked tokens
      </label>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Name</th>
              <th scope="col">Role</th>
              <th scope="col">Permissions</th>
              {!mine && <th scope="col">User</th>}
              <th scope="col">Created</th>
              <th scope="col">Last used</th>
              <th scope="col">Revoked</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {items.map((t) => (
              <tr key={t.id}>
                <td>{t.id}</td>
                <th scope="row">{t.name}</th>
                <td>{t.role}</td>
                <td>{(t.permissions ?? []).join(', ') || <span class="muted">–</span>}</td>
                {!mine && <td>{t.user ?? <span class="muted">–</span>}</td>}
                <td>
                  <When at={t.createdAt} /> <span class="muted">by {t.createdBy}</span>
                </td>
                <td>
                  <When at={t.lastUsedAt} />
                </td>
                <td>
                  <When at={t.revokedAt} />
                </td>
                <td>
                  {!t.revokedAt && (
                    <button class="button small" onClick={() => setRevoking(t)}>
                      Revoke…
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!list.loading && items.length === 0 && <p class="muted">No token.</p>}
      <CreateToken
        mine={mine}
        onCreated={(token) => {
          setCreated(token);
          void list.reload();
        }}
      />
      {revoking && (
        <Confirm
          title={`Revoke the token ${revoking.name}?`}
          confirmLabel="Revoke"
          danger
          onConfirm={async () => {
            const id = String(revoking.id ?? 0);
            const r = mine
              ? await call('delete', '/api/v1/me/tokens/{id}', { path: { id } })
              : await call('delete', '/api/v1/tokens/{id}', { path: { id: revoking.id ?? 0 } });
            if (r.ok) {
              setNotice(`The token ${revoking.name} is revoked.`);
              void list.reload();
            }
            return r;
          }}
          onClose={() => setRevoking(null)}
        >
          <p>Its next call is refused.</p>
        </Confirm>
      )}
    </section>
  );
}

function CreateToken({ mine, onCreated }: { mine: boolean; onCreated: (token: string) => void }) {
  const who = useStore(me);
  const [name, setName] = useState('');
  const [grant, setGrant] = useState<Grant>(noGrant);
  const [user, setUser] = useState('');
  const [error, setError] = useState<string | null>(null);
  return (
    <form
      class="panel filters"
      aria-label="Create a token"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        const permissions = permissionsOf(grant);
        const role = grant.role;
        const owner = mine ? who?.name : user.trim() || undefined;
        const r = mine
          ? await call('post', '/api/v1/me/tokens', { body: { name: name.trim(), role, permissions } })
          : await call('post', '/api/v1/tokens', { body: { name: name.trim(), role, permissions, ...(owner ? { user: owner } : {}) } });
        if (!r.ok) return setError(r.message);
        setName('');
        onCreated(r.data.token ?? '');
      }}
    >
      <h3 class="wide">Create a token</h3>
      <label class="field">
        <span>Name</span>
        <input name="name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <GrantFields grant={grant} onChange={setGrant} />
      {!mine && (
        <label class="field">
          <span>Acts as user (optional)</span>
          <input name="user" value={user} onInput={(e) => setUser(e.currentTarget.value)} />
        </label>
      )}
      <div class="field-buttons">
        <button type="submit" class="button primary">
          Create
        </button>
      </div>
      <ErrorNote message={error} />
    </form>
  );
}

export default function Tokens() {
  return (
    <Page title="My tokens">
      <p class="muted">Tokens that act as you, for scripts and tools. A token never has more rights than you.</p>
      <TokenTable mine title="Tokens acting as me" />
    </Page>
  );
}
