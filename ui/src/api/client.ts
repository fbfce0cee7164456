import type { components, paths } from './schema';
import { heard, lost } from '../connection';
import { store } from '../store';

// A typed fetch on the generated OpenAPI types: the path, its parameters,
// the body and the answer are checked against `ductus api-spec`.

type Method = 'get' | 'post' | 'put' | 'delete';

type PathsWith<M extends Method> = {
  [P in keyof paths]-?: undefined extends paths[P][M] ? never : P;
}[keyof paths];

type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

type JsonOf<R> = R extends { content: { 'application/json': infer J } } ? J : null;

type Success<O> = O extends { responses: infer R }
  ? R extends { 200: infer S }
    ? JsonOf<S>
    : R extends { 201: infer S }
      ? JsonOf<S>
      : null
  : never;

type BodyOf<O> = O extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : O extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B
    : never;

type QueryOf<O> = O extends { parameters: { query?: infer Q } } ? ([Q] extends [never] ? never : Q) : never;

type PathOf<O> = O extends { parameters: { path: infer P } } ? ([P] extends [never] ? never : P) : never;

export interface CallOptions<O> {
  path?: PathOf<O> extends never ? never : { [K in keyof PathOf<O>]: string | number };
  query?: QueryOf<O> extends never ? never : { [K in keyof QueryOf<O>]?: string | number | undefined | null };
  body?: BodyOf<O>;
}

export type ApiError = components['schemas']['Error'] & { status: number };
export type Result<T> = { ok: true; data: T } | ({ ok: false } & ApiError);

export type Answer<P extends keyof paths, M extends Method = 'get'> = Success<Operation<P, M>>;

// Who the console is signed in as: a token kept for this tab only, or the
// session cookie the browser holds (which script cannot read).
const TOKEN_KEY = 'ductus.token';

export function token(): string | null {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(value: string | null): void {
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // private mode without storage: the token lasts until the page closes
  }
}

/** Set on a 401 (signed out), a 403 password_change_required or a 403
 * totp_required (the role needs a second factor the user has not set up). */
export const authProblem = store<null | 'signed-out' | 'password-change' | 'totp-setup'>(null);

export async function call<M extends Method, P extends PathsWith<M>>(
  method: M,
  path: P,
  options: CallOptions<Operation<P, M>> = {},
): Promise<Result<Success<Operation<P, M>>>> {
  return raw(method, fill(path, options.path as Record<string, string | number> | undefined), {
    query: options.query as Record<string, string | number | undefined | null> | undefined,
    body: options.body,
  }) as Promise<Result<Success<Operation<P, M>>>>;
}

function fill(path: string, params?: Record<string, string | number>): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(String(params?.[name] ?? '')));
}

/** The query string of a GET, empty values left out. */
export function queryString(query?: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** For what the generated types don't know yet (and their tests). */
export async function raw(
  method: Method,
  path: string,
  options: { query?: Record<string, string | number | undefined | null>; body?: unknown } = {},
): Promise<Result<unknown>> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  const t = token();
  if (t) headers['Authorization'] = `Bearer ${t}`;
  // The API refuses a session's change without it: a page elsewhere can
  // make the browser send the cookie, but not this header.
  if (method !== 'get') headers['X-Ductus'] = '1';
  let body: string | undefined;
  if (options.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(options.body);
  }
  let response: Response;
  try {
    response = await fetch(path + queryString(options.query), {
      method: method.toUpperCase(),
      headers,
      body,
      credentials: 'same-origin',
    });
  } catch {
    // The banner says when and since when; the page says what it couldn't do.
    lost('the connection was refused or dropped');
    return { ok: false, status: 0, error: 'network', message: 'The engine could not be reached (it may not have received this request).' };
  }
  // A proxy in front of the engine answers for it when it can't reach it.
  if (response.status === 502 || response.status === 504) lost(`the proxy answered ${response.status}`);
  else heard();
  let data: unknown = null;
  const text = await response.text().catch(() => '');
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (response.ok) return { ok: true, data };
  const err = (data ?? {}) as Partial<components['schemas']['Error']>;
  const error = err.error ?? `http_${response.status}`;
  const message = err.message ?? `${response.status} ${response.statusText}`;
  const signingIn = path === '/api/v1/sessions' || path === '/api/v1/me/password';
  if (response.status === 401 && !signingIn) authProblem.set('signed-out');
  else if (response.status === 403 && error === 'password_change_required') authProblem.set('password-change');
  else if (response.status === 403 && error === 'totp_required') authProblem.set('totp-setup');
  return { ok: false, status: response.status, error, message };
}
