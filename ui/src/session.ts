import { authProblem, call, raw, setToken, token, type Answer } from './api/client';
import { store } from './store';

export type Me = Answer<'/api/v1/me'>;
export type Role = 'viewer' | 'operator' | 'admin';

/** undefined: not asked yet; null: nobody signed in. */
export const me = store<Me | null | undefined>(undefined);

const rank: Record<string, number> = { viewer: 0, operator: 1, admin: 2 };

export function atLeast(who: Me | null | undefined, role: Role): boolean {
  return !!who && (rank[who.role ?? ''] ?? -1) >= rank[role]!;
}

export function may(who: Me | null | undefined, permission: 'payloads' | 'audit'): boolean {
  return !!who && (who.permissions ?? []).includes(permission);
}

export function viaToken(): boolean {
  return token() !== null;
}

export async function loadMe(): Promise<void> {
  const r = await call('get', '/api/v1/me');
  if (r.ok) {
    me.set(r.data);
    if (r.data.mustChangePassword) authProblem.set('password-change');
    else if (r.data.totpRequired) authProblem.set('totp-setup');
    else authProblem.set(null);
    void loadTheme();
  } else if (r.error === 'password_change_required') {
    // Who it is stays unknown until the password is changed.
    me.set(null);
  } else {
    me.set(null);
  }
}

/** `second`: the authenticator app's code, or a recovery code, for a user
 * with a second factor (the engine answers 401 code_required without). */
export async function signInWithPassword(name: string, password: string, second?: { code?: string; recoveryCode?: string }) {
  setToken(null);
  const r = await call('post', '/api/v1/sessions', { body: { name, password, ...second } });
  if (!r.ok) return r;
  const user = r.data.user;
  if (user?.mustChangePassword) {
    authProblem.set('password-change');
    return r;
  }
  if (user?.totpRequired) {
    authProblem.set('totp-setup');
    return r;
  }
  await loadMe();
  return r;
}

export async function signInWithToken(value: string) {
  setToken(value.trim());
  const r = await call('get', '/api/v1/me');
  if (!r.ok) {
    setToken(null);
    return r;
  }
  authProblem.set(null);
  me.set(r.data);
  void loadTheme();
  return r;
}

export async function signOut(): Promise<void> {
  if (viaToken()) setToken(null);
  else await call('delete', '/api/v1/sessions/current');
  me.set(null);
  authProblem.set('signed-out');
}

// The theme: the system's, unless the user chose one; kept per user by the
// engine (/me/settings), or in this browser while the engine lacks it.
export type Theme = 'system' | 'light' | 'dark';
const THEME_KEY = 'ductus.theme';
export const theme = store<Theme>(readLocalTheme());

function readLocalTheme(): Theme {
  try {
    const t = localStorage.getItem(THEME_KEY);
    if (t === 'light' || t === 'dark') return t;
  } catch {
    // no storage: the system's theme
  }
  return 'system';
}

function apply(t: Theme): void {
  if (t === 'system') delete document.documentElement.dataset['theme'];
  else document.documentElement.dataset['theme'] = t;
}

apply(theme.get());
theme.subscribe(() => apply(theme.get()));

// Choices made on this page: a choice made while the saved theme is still
// on its way wins over it (the answer would otherwise undo the click).
let choices = 0;

async function loadTheme(): Promise<void> {
  const before = choices;
  const r = await raw('get', '/api/v1/me/settings');
  if (!r.ok || choices !== before) return;
  const t = (r.data as { theme?: unknown } | null)?.theme;
  if (t === 'system' || t === 'light' || t === 'dark') {
    theme.set(t);
    rememberLocally(t);
  }
}

function rememberLocally(t: Theme): void {
  try {
    if (t === 'system') localStorage.removeItem(THEME_KEY);
    else localStorage.setItem(THEME_KEY, t);
  } catch {
    // no storage: this page only
  }
}

export async function chooseTheme(t: Theme): Promise<void> {
  choices++;
  theme.set(t);
  rememberLocally(t);
  // A 404 (no such route yet, or a token without a user) leaves it local.
  await raw('put', '/api/v1/me/settings', { body: { theme: t } });
}
