import { store, useStore } from './store';

// Routing on the History API: the engine answers every path outside /api
// with index.html, so a reload or a shared link opens the same page.
export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  return { path: window.location.pathname, query: new URLSearchParams(window.location.search) };
}

export const location = store<Location>(current());

window.addEventListener('popstate', () => location.set(current()));

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const here = window.location.pathname + window.location.search;
  if (to === here) {
    location.set(current());
    return;
  }
  if (options.replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  location.set(current());
}

export function useLocation(): Location {
  return useStore(location);
}

/** `path` with `params` as its query, empty values left out. */
export function withQuery(path: string, params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/** Matches `pattern` (segments, `:name` for a parameter) against `path`. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/').filter(Boolean);
  const got = path.split('/').filter(Boolean);
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    const g = got[i]!;
    if (w.startsWith(':')) {
      try {
        params[w.slice(1)] = decodeURIComponent(g);
      } catch {
        return null;
      }
    } else if (w !== g) {
      return null;
    }
  }
  return params;
}
