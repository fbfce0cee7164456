import { useEffect, useState } from 'preact/hooks';
import { call } from '../api/client';
import { ErrorNote } from '../components/ui';
import { signInWithPassword, signInWithToken } from '../session';

// What the engine's single sign-on sends the browser back with when it
// refused (api/auth/oidc_routes.h).
const ssoErrors: Record<string, string> = {
  no_role: 'You signed in with your organisation, but you are in none of the groups that have a role here. Ask your administrator.',
  sso_failed: 'Single sign-on did not complete. Try again.',
  sso_unavailable: 'The sign-on service can’t be reached now. Try again later, or sign in with a password.',
};

function ssoErrorInUrl(): string | null {
  const code = new URLSearchParams(location.search).get('signin_error');
  if (!code) return null;
  // Said once: a reload or a bookmark doesn't say it again.
  history.replaceState(null, '', location.pathname + location.hash);
  return ssoErrors[code] ?? ssoErrors.sso_failed;
}

export default function SignIn({ onDone }: { onDone: () => void }) {
  const [mode, setMode] = useState<'password' | 'token'>('password');
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [tokenText, setTokenText] = useState('');
  // Asked for once the engine says the user has a second factor.
  const [second, setSecond] = useState<null | 'code' | 'recovery'>(null);
  const [code, setCode] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(ssoErrorInUrl);
  const [sso, setSso] = useState<{ label: string; start: string } | null>(null);
  useEffect(() => {
    call('get', '/api/v1/auth/methods').then((r) => {
      if (r.ok && r.data.oidc) setSso({ label: r.data.oidc.label ?? 'single sign-on', start: r.data.oidc.start ?? '/api/v1/auth/oidc/start' });
    });
  }, []);
  return (
    <main class="signin" id="main">
      <div class="signin-box">
        <h1 tabIndex={-1} id="page-title">
          Sign in to Ductus
        </h1>
        {sso && (
          <>
            <a class="button primary wide sso" href={sso.start}>
              Sign in with {sso.label}
            </a>
            <p class="or muted">or</p>
          </>
        )}
        <div class="tabs" role="radiogroup" aria-label="Sign in with">
          <label class={mode === 'password' ? 'tab on' : 'tab'}>
            <input type="radio" name="mode" checked={mode === 'password'} onChange={() => setMode('password')} /> Name and password
          </label>
          <label class={mode === 'token' ? 'tab on' : 'tab'}>
            <input type="radio" name="mode" checked={mode === 'token'} onChange={() => setMode('token')} /> API token
          </label>
        </div>
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            setBusy(true);
            setError(null);
            const factor = second === 'code' ? { code: code.replace(/\s/g, '') } : second === 'recovery' ? { recoveryCode: code.trim() } : undefined;
            const r = mode === 'password' ? await signInWithPassword(name.trim(), password, factor) : await signInWithToken(tokenText);
            setBusy(false);
            if (r.ok) return onDone();
            if (r.error === 'code_required') {
              setSecond('code');
              setError(null);
              return;
            }
            setCode('');
            setError(second ? 'Wrong name, password or code.' : r.message);
          }}
        >
          {mode === 'password' ? (
            <>
              <label class="field">
                <span>Name</span>
                <input name="name" autoComplete="username" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
              </label>
              <label class="field">
                <span>Password</span>
                <input
                  name="password"
                  type="password"
                  autoComplete="current-password"
                  required
                  value={password}
                  onInput={(e) => setPassword(e.currentTarget.value)}
                />
              </label>
              {second && (
                <>
                  <label class="field">
                    <span>{second === 'code' ? 'Code from your authenticator app' : 'Recovery code'}</span>
                    <input
                      name="code"
                      autoComplete="one-time-code"
                      inputMode={second === 'code' ? 'numeric' : 'text'}
                      pattern={second === 'code' ? '\\s*[0-9]{3}\\s*[0-9]{3}\\s*' : undefined}
                      required
                      autoFocus
                      value={code}
                      onInput={(e) => setCode(e.currentTarget.value)}
                    />
                  </label>
                  <button
                    type="button"
                    class="button alt-factor"
                    onClick={() => {
                      setSecond(second === 'code' ? 'recovery' : 'code');
                      setCode('');
                    }}
                  >
                    {second === 'code' ? 'Use a recovery code instead' : 'Use the app’s code instead'}
                  </button>
                </>
              )}
            </>
          ) : (
            <label class="field">
              <span>Token (dux_…), kept in this tab only</span>
              <input
                name="token"
                type="password"
                autoComplete="off"
                required
                pattern="\s*dux_[0-9a-fA-F]{64}\s*"
                value={tokenText}
                onInput={(e) => setTokenText(e.currentTarget.value)}
              />
            </label>
          )}
          <ErrorNote message={error} />
          <button type="submit" class="button primary wide" disabled={busy}>
            {busy ? 'Signing in…' : 'Sign in'}
          </button>
        </form>
      </div>
    </main>
  );
}
