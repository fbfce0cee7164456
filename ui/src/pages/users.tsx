import { useState } from 'preact/hooks';
import { GrantFields, noGrant, permissionsOf, type Grant } from '../components/grant';
import { call, type Answer } from '../api/client';
import { Badge, Confirm, ErrorNote, Notice, Page, When, useApi } from '../components/ui';
import { TokenTable } from './tokens';

type User = NonNullable<Answer<'/api/v1/users'>['items']>[number];

export default function Users() {
  const list = useApi(() => call('get', '/api/v1/users'), []);
  const [disabling, setDisabling] = useState<User | null>(null);
  const [enabling, setEnabling] = useState<User | null>(null);
  const [resetting, setResetting] = useState<User | null>(null);
  const [resettingPassword, setResettingPassword] = useState<User | null>(null);
  const [changing, setChanging] = useState<User | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [password, setPassword] = useState<{ name: string; password: string; oneTime: boolean } | null>(null);
  return (
    <Page title="Users and tokens">
      <section aria-labelledby="users-h">
        <h2 id="users-h">Users</h2>
        <ErrorNote message={list.error} />
        <Notice message={notice} />
        {password && (
          <div class="note ok" role="status" data-password-of={password.name}>
            <p>
              {password.oneTime
                ? `The one-time password of ${password.name}, shown this once (they choose their own at their next sign-in):`
                : `The password of ${password.name}, shown this once:`}
            </p>
            <code class="secret">{password.password}</code>
          </div>
        )}
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Permissions</th>
                <th scope="col">Signs in with</th>
                <th scope="col">State</th>
                <th scope="col">Two-step</th>
                <th scope="col">Created</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {(list.data?.items ?? []).map((u) => (
                <tr key={u.id} data-user={u.name}>
                  <th scope="row">{u.name}</th>
                  <td data-cell="role">{u.role}</td>
                  <td>{(u.permissions ?? []).join(', ') || <span class="muted">–</span>}</td>
                  <td>{u.source === 'ldap' ? 'directory password' : u.source === 'oidc' ? 'single sign-on' : 'local password'}</td>
                  <td>
                    {u.disabled ? (
                      <Badge value="stopped" label="disabled" />
                    ) : u.leftDirectoryAt ? (
                      <Badge value="stopped" label="left the directory" />
                    ) : u.lockedUntil ? (
                      <Badge value="closed" label="locked" />
                    ) : u.mustChangePassword ? (
                      <Badge value="pending" label="must change password" />
                    ) : (
                      <Badge value="ok" label="active" />
                    )}
                  </td>
                  <td>{u.source !== 'local' ? <span class="muted">{u.source === 'ldap' ? 'the directory’s' : 'the provider’s'}</span> : u.totp ? 'on' : <span class="muted">off</span>}</td>
                  <td>
                    <When at={u.createdAt} />
                  </td>
                  <td>
                    {u.disabled ? (
                      <button class="button small" onClick={() => setEnabling(u)}>
                        Enable…
                      </button>
                    ) : (
                      <button class="button small" onClick={() => setDisabling(u)}>
                        Disable…
                      </button>
                    )}{' '}
                    {/* A directory's or a provider's user: their password and role are decided there. */}
                    {u.source === 'local' && (
                      <>
                        <button class="button small" onClick={() => setChanging(u)}>
                          Change role…
                        </button>{' '}
                        <button class="button small" onClick={() => setResettingPassword(u)}>
                          Reset password…
                        </button>{' '}
                      </>
                    )}
                    {u.totp && (
                      <button class="button small" onClick={() => setResetting(u)}>
                        Reset two-step…
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <CreateUser
          onCreated={(name, pw) => {
            if (pw) setPassword({ name, password: pw, oneTime: false });
            setNotice(`The user ${name} is created.`);
            void list.reload();
          }}
        />
      </section>
      <TotpPolicy />
      <TokenTable mine={false} title="All tokens" />
      {disabling && (
        <Confirm
          title={`Disable ${disabling.name}?`}
          confirmLabel="Disable"
          danger
          onConfirm={async () => {
            const r = await call('post', '/api/v1/users/{name}/disable', { path: { name: disabling.name ?? '' } });
            if (r.ok) {
              setNotice(`${disabling.name} is disabled.`);
              void list.reload();
            }
            return r;
          }}
          onClose={() => setDisabling(null)}
        >
          <p>Their sessions end and their tokens stop working.</p>
        </Confirm>
      )}
      {enabling && (
        <Confirm
          title={`Enable ${enabling.name} again?`}
          confirmLabel="Enable"
          onConfirm={async () => {
            const r = await call('post', '/api/v1/users/{name}/enable', { path: { name: enabling.name ?? '' } });
            if (r.ok) {
              setNotice(`${enabling.name} is enabled again.`);
              void list.reload();
            }
            return r;
          }}
          onClose={() => setEnabling(null)}
        >
          <p>They can sign in again, and their tokens that were not revoked work again.</p>
        </Confirm>
      )}
      {resettingPassword && (
        <Confirm
          title={`Reset the password of ${resettingPassword.name}?`}
          confirmLabel="Reset password"
          danger
          onConfirm={async () => {
            const name = resettingPassword.name ?? '';
            const r = await call('post', '/api/v1/users/{name}/password', { path: { name } });
            if (r.ok) {
              setPassword({ name, password: r.data.password ?? '', oneTime: true });
              setNotice(`${name} has a one-time password: their sessions ended.`);
              void list.reload();
            }
            return r;
          }}
          onClose={() => setResettingPassword(null)}
        >
          <p>
            A one-time password is made and shown to you once, to hand over; they must choose their own at their next
            sign-in. Their sessions end now; their tokens keep working.
          </p>
        </Confirm>
      )}
      {changing && (
        <ChangeRole
          user={changing}
          onChanged={(name, role) => {
            setNotice(`${name} is now ${role}, from their next request.`);
            void list.reload();
          }}
          onClose={() => setChanging(null)}
        />
      )}
      {resetting && (
        <Confirm
          title={`Reset ${resetting.name}'s two-step sign-in?`}
          confirmLabel="Reset"
          danger
          onConfirm={async () => {
            const r = await call('delete', '/api/v1/users/{name}/totp', { path: { name: resetting.name ?? '' } });
            if (r.ok) {
              setNotice(`${resetting.name} signs in with the password alone until they set up two-step sign-in again.`);
              void list.reload();
            }
            return r;
          }}
          onClose={() => setResetting(null)}
        >
          <p>For a lost phone: their sessions end, and their password alone signs them in until they set it up again.</p>
        </Confirm>
      )}
    </Page>
  );
}

const roles = ['viewer', 'operator', 'admin'] as const;

// Another role and permissions for a local user; the API refuses more than
// the admin holds, and leaving no enabled admin.
function ChangeRole({ user, onChanged, onClose }: { user: User; onChanged: (name: string, role: string) => void; onClose: () => void }) {
  const held = user.permissions ?? [];
  const [grant, setGrant] = useState<Grant>({ role: user.role ?? 'viewer', payloads: held.includes('payloads'), audit: held.includes('audit') });
  return (
    <Confirm
      title={`Change the role of ${user.name}`}
      confirmLabel="Change role"
      onConfirm={async () => {
        const name = user.name ?? '';
        const r = await call('put', '/api/v1/users/{name}/role', { path: { name }, body: { role: grant.role, permissions: permissionsOf(grant) } });
        if (r.ok) onChanged(name, grant.role);
        return r;
      }}
      onClose={onClose}
    >
      <GrantFields grant={grant} onChange={setGrant} />
      <p class="muted">Their sessions and tokens stay; each does what the new role allows from its next request.</p>
    </Confirm>
  );
}

// The roles whose users must sign in with a code from an app.
function TotpPolicy() {
  const policy = useApi(() => call('get', '/api/v1/auth/totp'), []);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const required = policy.data?.requiredFor ?? [];
  return (
    <section aria-labelledby="totp-h">
      <h2 id="totp-h">Two-step sign-in</h2>
      <ErrorNote message={policy.error ?? error} />
      <Notice message={notice} />
      <fieldset class="panel">
        <legend>Required for the users of these roles (until they set it up, they can do nothing else)</legend>
        {roles.map((role) => (
          <label key={role} class="check">
            <input
              type="checkbox"
              name={`totp-${role}`}
              checked={required.includes(role)}
              disabled={!policy.data}
              onChange={async (e) => {
                const next = e.currentTarget.checked ? [...required, role] : required.filter((r) => r !== role);
                setError(null);
                const r = await call('put', '/api/v1/auth/totp', { body: { requiredFor: next } });
                if (!r.ok) return setError(r.message);
                setNotice(next.length ? `Required for: ${next.join(', ')}.` : 'Required for no role.');
                void policy.reload();
              }}
            />{' '}
            {role}
          </label>
        ))}
      </fieldset>
    </section>
  );
}

function CreateUser({ onCreated }: { onCreated: (name: string, password: string | null) => void }) {
  const [name, setName] = useState('');
  const [grant, setGrant] = useState<Grant>(noGrant);
  const [error, setError] = useState<string | null>(null);
  return (
    <form
      class="panel filters"
      aria-label="Create a user"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        const permissions = permissionsOf(grant);
        const role = grant.role;
        // No password given: the engine makes one, to be changed at the first sign-in.
        const r = await call('post', '/api/v1/users', { body: { name: name.trim(), role, permissions, mustChangePassword: true } });
        if (!r.ok) return setError(r.message);
        setName('');
        onCreated(r.data.user?.name ?? name, r.data.password ?? null);
      }}
    >
      <h3 class="wide">Create a user</h3>
      <label class="field">
        <span>Name</span>
        <input name="name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <GrantFields grant={grant} onChange={setGrant} />
      <div class="field-buttons">
        <button type="submit" class="button primary">
          Create
        </button>
      </div>
      <ErrorNote message={error} />
    </form>
  );
}
