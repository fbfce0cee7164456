import { useState } from 'preact/hooks';
import { call } from '../api/client';
import { ErrorNote, Notice, Page } from '../components/ui';

export default function Password({ forced, onDone }: { forced?: boolean; onDone?: () => void }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [again, setAgain] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState(false);
  return (
    <Page title={forced ? 'Choose a new password' : 'Change my password'}>
      {forced && <p>Your password was set by an administrator: choose one of your own to go on.</p>}
      <Notice message={done ? 'Your password is changed; your other sessions have ended.' : null} />
      <form
        class="narrow"
        onSubmit={async (e) => {
          e.preventDefault();
          if (next !== again) return setError('The new passwords differ.');
          if (next.length < 12) return setError('The new password needs at least 12 characters.');
          setBusy(true);
          setError(null);
          const r = await call('post', '/api/v1/me/password', { body: { currentPassword: current, newPassword: next } });
          setBusy(false);
          if (!r.ok) return setError(r.message);
          setCurrent('');
          setNext('');
          setAgain('');
          setDone(true);
          onDone?.();
        }}
      >
        <label class="field">
          <span>Current password</span>
          <input
            type="password"
            name="current"
            autoComplete="current-password"
            required
            value={current}
            onInput={(e) => setCurrent(e.currentTarget.value)}
          />
        </label>
        <label class="field">
          <span>New password (at least 12 characters)</span>
          <input
            type="password"
            name="new"
            autoComplete="new-password"
            required
            minLength={12}
            value={next}
            onInput={(e) => setNext(e.currentTarget.value)}
          />
        </label>
        <label class="field">
          <span>New password again</span>
          <input
            type="password"
            name="again"
            autoComplete="new-password"
            required
            minLength={12}
            value={again}
            onInput={(e) => setAgain(e.currentTarget.value)}
          />
        </label>
        <ErrorNote message={error} />
        <button type="submit" class="button primary" disabled={busy}>
          {busy ? 'Changing…' : 'Change password'}
        </button>
      </form>
    </Page>
  );
}
