import type { ComponentChildren } from 'preact';
import { useEffect } from 'preact/hooks';
import { authProblem } from './api/client';
import { clockTime, useConnection } from './connection';
import { lazy } from './lazy';
import { pages as shortcutPages, useShortcuts } from './shortcuts';
import Interfaces from './pages/interfaces';
import Message from './pages/message';
import Messages from './pages/messages';
import Overview from './pages/overview';
import Quarantine from './pages/quarantine';
import SignIn from './pages/signin';
import { match, navigate, useLocation } from './router';
import { atLeast, chooseTheme, loadMe, may, me, signOut, theme, type Theme } from './session';
import { useStore } from './store';

const Alerts = lazy(() => import('./pages/alerts'));
const Events = lazy(() => import('./pages/events'));
const Retention = lazy(() => import('./pages/retention'));
const Interface = lazy(() => import('./pages/interface'));
const Search = lazy(() => import('./pages/search'));
const Audit = lazy(() => import('./pages/audit'));
const Tokens = lazy(() => import('./pages/tokens'));
const Users = lazy(() => import('./pages/users'));
const Password = lazy(() => import('./pages/password'));
const Totp = lazy(() => import('./pages/totp'));

function NotFound() {
  return (
    <>
      <h1 tabIndex={-1} id="page-title">
        Not found
      </h1>
      <p>
        No page here. <a href="/">Back to the overview</a>
      </p>
    </>
  );
}

function Denied() {
  return (
    <>
      <h1 tabIndex={-1} id="page-title">
        Not allowed
      </h1>
      <p>Your role or permissions do not include this page.</p>
    </>
  );
}

export function App() {
  const { path, query } = useLocation();
  const who = useStore(me);
  const problem = useStore(authProblem);
  const conn = useConnection();
  useShortcuts();

  useEffect(() => {
    void loadMe();
  }, []);

  // Signed in at the sign-in page's address: the overview, at its own.
  useEffect(() => {
    if (who && !problem && path === '/signin') navigate('/', { replace: true });
  }, [who, problem, path]);

  // Each navigation moves focus to the new page's heading.
  useEffect(() => {
    const h = document.getElementById('page-title');
    if (h && document.activeElement !== h) h.focus({ preventScroll: true });
  }, [path, problem, who === undefined]);

  if (problem === 'password-change') return <Forced />;
  if (problem === 'totp-setup') return <Forced totp />;
  if (who === undefined && problem !== 'signed-out') return <p class="loading">Loading…</p>;
  if (problem === 'signed-out' || !who) {
    return (
      <SignIn
        onDone={() => {
          const next = query.get('next');
          navigate(next && next.startsWith('/') && !next.startsWith('//') ? next : path === '/signin' ? '/' : path, { replace: true });
        }}
      />
    );
  }
  let page: ComponentChildren;
  let p: Record<string, string> | null;
  if (path === '/' || path === '/signin') page = <Overview />;
  else if (path === '/interfaces') page = <Interfaces />;
  else if ((p = match('/interfaces/:name/messages', path))) page = <Messages key={p['name']} name={p['name']!} />;
  else if ((p = match('/interfaces/:name', path))) page = <Interface key={p['name']} name={p['name']!} />;
  else if ((p = match('/messages/:id', path)) && /^\d+$/.test(p['id']!)) page = <Message key={p['id']} id={p['id']!} />;
  else if (path === '/quarantine') page = <Quarantine />;
  else if (path === '/search') page = <Search />;
  else if (path === '/alerts') page = <Alerts />;
  else if (path === '/events') page = <Events />;
  else if (path === '/retention') page = <Retention />;
  else if (path === '/audit') page = may(who, 'audit') ? <Audit /> : <Denied />;
  else if (path === '/tokens') page = <Tokens />;
  else if (path === '/users') page = atLeast(who, 'admin') ? <Users /> : <Denied />;
  else if (path === '/password') page = who.via === 'session' ? <Password /> : <Denied />;
  else if (path === '/totp') page = who.via === 'session' ? <Totp /> : <Denied />;
  else page = <NotFound />;

  return (
    <>
      <a class="skip" href="#main">
        Skip to the page
      </a>
      <div class={conn.lostAt === null ? 'shell' : 'shell stale'}>
        <Nav path={path} />
        <main id="main" tabIndex={-1}>
          <Disconnected lostAt={conn.lostAt} cause={conn.cause} />
          <SearchBox />
          {page}
        </main>
      </div>
    </>
  );
}

// Above every page: a number opens that message; anything else looks for
// it as a control id or key in every interface. "/" focuses it.
function SearchBox() {
  return (
    <form
      role="search"
      class="searchbox"
      onSubmit={(e) => {
        e.preventDefault();
        const input = e.currentTarget.elements.namedItem('q') as HTMLInputElement;
        const text = input.value.trim();
        if (!text) return;
        navigate(/^\d+$/.test(text) ? `/messages/${text}` : `/search?q=${encodeURIComponent(text)}`);
      }}
    >
      <label class="visually-hidden" for="searchbox">
        Find a message
      </label>
      <input id="searchbox" name="q" type="search" data-search placeholder="Message id, control id or MRN   ( / )" autoComplete="off" />
      <button type="submit" class="button">
        Find
      </button>
    </form>
  );
}

// Above every page while the engine doesn't answer: what is shown was
// read before that time. Cleared by the first answer after.
function Disconnected({ lostAt, cause }: { lostAt: number | null; cause: string | null }) {
  // The live region is always there, so a screen reader hears it appear.
  return (
    <div role="status" aria-live="assertive" class="banner-slot">
      {lostAt !== null && (
        <p class="banner lost" data-banner="disconnected">
          <strong>Disconnected since {clockTime(lostAt)}</strong> — data may be stale. Retrying… <span class="muted">({cause})</span>
        </p>
      )}
    </div>
  );
}

function Nav({ path }: { path: string }) {
  const who = useStore(me)!;
  const current = useStore(theme);
  const item = (href: string, label: string, active = path === href || (href !== '/' && path.startsWith(href + '/'))) => (
    <li>
      <a href={href} aria-current={active ? 'page' : undefined}>
        {label}
      </a>
    </li>
  );
  return (
    <nav class="side" aria-label="Main">
      <div class="brand">Ductus</div>
      <ul>
        {item('/', 'Overview')}
        {item('/interfaces', 'Interfaces', path === '/interfaces' || path.startsWith('/interfaces/') || path.startsWith('/messages/'))}
        {item('/quarantine', 'Quarantine')}
        {item('/alerts', 'Alerts')}
        {item('/events', 'Events')}
        {item('/retention', 'Retention')}
        {may(who, 'audit') && item('/audit', 'Audit log')}
        {item('/tokens', 'My tokens')}
        {atLeast(who, 'admin') && item('/users', 'Users and tokens')}
        {who.via === 'session' && item('/password', 'Change password')}
        {who.via === 'session' && item('/totp', 'Two-step sign-in')}
      </ul>
      <details class="shortcuts">
        <summary>Keyboard shortcuts</summary>
        <dl>
          <dt>
            <kbd>/</kbd>
          </dt>
          <dd>search</dd>
          {Object.entries(shortcutPages).flatMap(([key, [, label]]) => [
            <dt key={`t${key}`}>
              <kbd>g</kbd> <kbd>{key}</kbd>
            </dt>,
            <dd key={`d${key}`}>{label}</dd>,
          ])}
        </dl>
      </details>
      <div class="side-foot">
        <div>
          <span class="who">{who.name}</span> <span class="muted">({who.role})</span>
        </div>
        <label class="field">
          <span>Theme</span>
          <select value={current} onChange={(e) => void chooseTheme(e.currentTarget.value as Theme)}>
            <option value="system">Follow the system</option>
            <option value="light">Light</option>
            <option value="dark">Dark</option>
          </select>
        </label>
        <button class="button wide" onClick={() => void signOut()}>
          Sign out
        </button>
      </div>
    </nav>
  );
}

// A password to choose, or a second factor the role needs: nothing else
// opens until it is done.
function Forced({ totp }: { totp?: boolean }) {
  const done = () => {
    authProblem.set(null);
    void loadMe();
    navigate('/', { replace: true });
  };
  return (
    <main class="signin" id="main">
      <div class="signin-box wide-box">
        {totp ? <Totp forced onDone={done} /> : <Password forced onDone={done} />}
        <p>
          <button class="button" onClick={() => void signOut()}>
            Sign out
          </button>
        </p>
      </div>
    </main>
  );
}
