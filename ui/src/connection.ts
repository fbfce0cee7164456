import { useEffect } from 'preact/hooks';
import { store, useStore } from './store';

// Whether the engine answers, as every page shows it. A page drawn from
// answers that stopped coming must say so, or a dead engine looks alive
// with its last counts. The engine is heard from by any answer (an error
// status is an answer too), by the event stream, and by a probe of
// /api/v1/health when nothing else came for a while: the stream sends
// only changes, and a hung engine closes nothing, so silence alone is
// not proof and an unanswered probe is.

export interface Connection {
  /** When the engine was first found unreachable; null while it answers. */
  lostAt: number | null;
  /** What failed, in an operator's words (not shown as the headline). */
  cause: string | null;
}

export const connection = store<Connection>({ lostAt: null, cause: null });

// Probe after this much silence, and give the probe this long: a lost
// engine is noticed within the two together (under 5 s), even when
// nothing closes a socket.
export const quietMs = 2000;
export const probeTimeoutMs = 2500;

let lastHeard = Date.now();

const backListeners = new Set<() => void>();

/** Calls `listener` each time the engine answers again after being lost:
 * what a page shows was read before, so it reads it again. */
export function onReconnect(listener: () => void): () => void {
  backListeners.add(listener);
  return () => backListeners.delete(listener);
}

export function heard(): void {
  lastHeard = Date.now();
  if (connection.get().lostAt === null) return;
  connection.set({ lostAt: null, cause: null });
  for (const l of [...backListeners]) l();
}

export function lost(cause: string): void {
  if (connection.get().lostAt === null) connection.set({ lostAt: Date.now(), cause });
}

let probing = false;

async function probe(): Promise<void> {
  if (probing) return;
  probing = true;
  const abort = new AbortController();
  const timer = window.setTimeout(() => abort.abort(), probeTimeoutMs);
  try {
    // Any HTTP answer means the engine's API runs (503 while it drains).
    await fetch('/api/v1/health', { cache: 'no-store', signal: abort.signal });
    heard();
  } catch {
    lost(abort.signal.aborted ? `no answer within ${probeTimeoutMs / 1000} s` : 'the connection was refused or dropped');
  } finally {
    window.clearTimeout(timer);
    probing = false;
  }
}

let watchers = 0;
let watchTimer: number | undefined;

/** Watches the engine while the signed-in shell is shown. */
export function useConnection(): Connection {
  useEffect(() => {
    watchers++;
    if (watchers === 1) {
      lastHeard = Date.now();
      watchTimer = window.setInterval(() => {
        if (Date.now() - lastHeard >= quietMs || connection.get().lostAt !== null) void probe();
      }, 500);
    }
    return () => {
      watchers--;
      if (watchers === 0) {
        window.clearInterval(watchTimer);
        watchTimer = undefined;
      }
    };
  }, []);
  return useStore(connection);
}

/** hh:mm:ss in the browser's time zone, as the banner says it. */
export function clockTime(at: number): string {
  return new Date(at).toLocaleTimeString('en-GB', { hour12: false });
}
