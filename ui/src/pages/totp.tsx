import { useState } from 'preact/hooks';
import { QrCode } from '../components/qr';
import { call } from '../api/client';
import { ErrorNote, Notice, Page } from '../components/ui';
import { loadMe, me } from '../session';
import { useStore } from '../store';

/** The secret as an app's "enter a key" screen shows it: groups of four. */
function grouped(secret: string): string {
  return secret.replace(/(.{4})(?=.)/g, '$1 ');
}

/**
 * Two-step sign-in: set up codes from an authenticator app (the secret and
 * its otpauth:// link, then a code to prove the app has it, then the
 * recovery codes, shown once), or turn them off with a current code.
 * `forced`: the user's role requires it and nothing else is open until done.
 */
export default function Totp({ forced, onDone }: { forced?: boolean; onDone?: () => void }) {
  const who = useStore(me);
  const [secret, setSecret] = useState<{ secret: string; uri: string } | null>(null);
  const [code, setCode] = useState('');
  const [password, setPassword] = useState('');
  const [recovery, setRecovery] = useState<string[] | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const on = !!who?.totp && !recovery;

  const begin = async () => {
    setBusy(true);
    setError(null);
    const r = await call('post', '/api/v1/me/totp', { body: { password } });
    setBusy(false);
    setPassword('');
    if (!r.ok) return setError(r.message);
    setSecret({ secret: r.data.secret ?? '', uri: r.data.uri ?? '' });
  };

  return (
    <Page title={forced ? 'Set up two-step sign-in' : 'Two-step sign-in'}>
      {forced && <p>Your role signs in with a code from an authenticator app beside the password. Set it up to go on.</p>}
      <Notice message={notice} />
      {recovery ? (
        <>
          <p>
            Two-step sign-in is on. Keep these recovery codes somewhere safe: each signs you in once without the app. They are
            shown this once.
          </p>
          <ul class="recovery-codes">
            {recovery.map((c) => (
              <li key={c}>
                <code>{c}</code>
              </li>
            ))}
          </ul>
          <button
            class="button primary"
            onClick={() => {
              setRecovery(null);
              void loadMe();
              onDone?.();
            }}
          >
            I have kept them
          </button>
        </>
      ) : on ? (
        <form
          class="narrow"
          onSubmit={async (e) => {
            e.preventDefault();
            setBusy(true);
            setError(null);
            const r = await call('post', '/api/v1/me/totp/disable', { body: { code: code.replace(/\s/g, '') } });
            setBusy(false);
            setCode('');
            if (!r.ok) return setError(r.message);
            setNotice('Two-step sign-in is off: your password alone signs you in.');
            void loadMe();
          }}
        >
          <p>Two-step sign-in is on: you sign in with your password and a code from your authenticator app.</p>
          <label class="field">
            <span>Code from your app, to turn it off</span>
            <input name="code" autoComplete="one-time-code" inputMode="numeric" required value={code} onInput={(e) => setCode(e.currentTarget.value)} />
          </label>
          <ErrorNote message={error} />
          <button type="submit" class="button" disabled={busy}>
            Turn off
          </button>
        </form>
      ) : !secret ? (
        <form
          class="narrow"
          onSubmit={(e) => {
            e.preventDefault();
            void begin();
          }}
        >
          <p>With two-step sign-in on, your password alone no longer signs you in: you also give the code your authenticator app shows.</p>
          <label class="field">
            <span>Your password, to set it up</span>
            <input
              type="password"
              name="password"
              autoComplete="current-password"
              required
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
            />
          </label>
          <ErrorNote message={error} />
          <button type="submit" class="button primary" disabled={busy}>
            Set up
          </button>
        </form>
      ) : (
        <form
          class="narrow"
          onSubmit={async (e) => {
            e.preventDefault();
            setBusy(true);
            setError(null);
            const r = await call('post', '/api/v1/me/totp/confirm', { body: { code: code.replace(/\s/g, '') } });
            setBusy(false);
            setCode('');
            if (!r.ok) return setError(r.message);
            setSecret(null);
            setRecovery(r.data.recoveryCodes ?? []);
          }}
        >
          <p>Scan this code with your authenticator app:</p>
          <p>
            <QrCode text={secret.uri} label="QR code of the two-step sign-in key, for an authenticator app" />
          </p>
          <p>Or add an account with this key (time-based, 6 digits), or open the link on the phone that has the app:</p>
          <p>
            <code class="totp-secret" data-secret={secret.secret}>
              {grouped(secret.secret)}
            </code>
          </p>
          <p>
            <a href={secret.uri}>Open in the authenticator app</a>
          </p>
          <label class="field">
            <span>The code the app shows now</span>
            <input
              name="code"
              autoComplete="one-time-code"
              inputMode="numeric"
              pattern="\s*[0-9]{3}\s*[0-9]{3}\s*"
              required
              value={code}
              onInput={(e) => setCode(e.currentTarget.value)}
            />
          </label>
          <ErrorNote message={error} />
          <button type="submit" class="button primary" disabled={busy}>
            {busy ? 'Checking…' : 'Turn on'}
          </button>
        </form>
      )}
    </Page>
  );
}
