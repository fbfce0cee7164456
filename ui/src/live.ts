import { call, token, type Answer } from './api/client';
import { useEffect } from 'preact/hooks';
import { heard, lost, onReconnect } from './connection';
import { store, useStore } from './store';

// The interfaces and their counts, kept current: from the engine's event
// stream for a session, by polling for a token (EventSource cannot send an
// Authorization header).

type Listed = Answer<'/api/v1/interfaces'>['interfaces'][number];
export type Paused = Listed['destinations'][number]['paused'];

/** The monitor's judgement: a state (worst first: stopped, paused, stalled,
 * error, behind, late, quiet, ok) and the reason to act on; null before the
 * engine judges. */
export interface Health {
  state: string;
  reason: string;
}

/** What the monitor saw behind a destination's judgement. */
export interface HealthFacts {
  waiting: number;
  /** The oldest waiting message's age when the list was read (not in events). */
  oldestSeconds: number | null;
  lastSent: string;
  lastError: string;
  lastErrorText: string;
  catchingUp: boolean | null;
  causes: string[];
}

/** Received → finished here, since the engine started (from the list only). */
export interface Timing {
  count: number;
  p50Ms: number | null;
  p95Ms: number | null;
}

export interface DestinationView {
  name: string;
  route: boolean;
  pending: number | null;
  quarantined: number | null;
  paused: boolean;
  pausedInfo: Paused;
  sent: number;
  filtered: number;
  retries: number;
  health: Health | null;
  facts: HealthFacts | null;
  latency: Timing | null;
}

export type IntakeStop = Listed['intakeStopped'];

export interface InterfaceView {
  name: string;
  source: string;
  state: 'running' | 'stopped';
  gate: 'open' | 'closed' | null;
  /** An operator's stop of its intake (POST .../stop); null while it takes messages. */
  intakeStopped: IntakeStop;
  received: number;
  duplicates: number;
  destinations: DestinationView[];
  health: Health | null;
}

export interface LiveState {
  interfaces: InterfaceView[] | null;
  engineState: string | null;
  mode: 'events' | 'polling' | 'off';
  error: string | null;
  updatedAt: number;
}

export const live = store<LiveState>({ interfaces: null, engineState: null, mode: 'off', error: null, updatedAt: 0 });

interface Snapshot {
  state: string;
  interfaces: {
    name: string;
    state: 'running' | 'stopped';
    gate: 'open' | 'closed' | null;
    intakeStopped?: boolean;
    received: number;
    duplicates: number;
    destinations: {
      name: string;
      sent: number;
      filtered: number;
      retries: number;
      pending: number | null;
      quarantinedNow: number | null;
      paused: boolean;
      health?: Health & Partial<RawFacts>;
    }[];
    health?: Health;
  }[];
}

interface RawFacts {
  waiting: number;
  oldestSeconds: number;
  lastSent: string;
  lastError: string;
  lastErrorText: string;
  catchingUp: boolean;
  causes: string[];
}

function judged(h: Health | undefined): Health | null {
  return h ? { state: h.state, reason: h.reason } : null;
}

function factsOf(h: (Health & Partial<RawFacts>) | undefined, before: HealthFacts | null): HealthFacts | null {
  if (!h) return null;
  return {
    waiting: h.waiting ?? 0,
    // Events leave out what moves by itself; the last list's age stays.
    oldestSeconds: h.oldestSeconds ?? before?.oldestSeconds ?? null,
    lastSent: h.lastSent ?? '',
    lastError: h.lastError ?? '',
    lastErrorText: h.lastErrorText ?? '',
    catchingUp: h.catchingUp ?? null,
    causes: h.causes ?? [],
  };
}

function fromList(list: Listed[]): InterfaceView[] {
  return list.map((f) => ({
    name: f.name,
    source: f.source,
    state: f.state,
    gate: f.gate ?? null,
    intakeStopped: f.intakeStopped ?? null,
    received: f.sinceStart.received,
    duplicates: f.sinceStart.duplicates,
    destinations: f.destinations.map((d) => ({
      name: d.name,
      route: d.route,
      pending: d.pending ?? null,
      quarantined: d.quarantined ?? null,
      paused: !!d.paused,
      pausedInfo: d.paused ?? null,
      sent: d.sinceStart.sent,
      filtered: d.sinceStart.filtered,
      retries: d.sinceStart.retries,
      health: judged(d.health),
      facts: factsOf(d.health, null),
      latency: d.timings.latency ?? null,
    })),
    health: judged(f.health),
  }));
}

// A snapshot lacks what never changes (source, route) and the pause's
// details: those come from the last full list, which is asked again when a
// pause comes or goes.
function fromSnapshot(s: Snapshot, before: InterfaceView[] | null): { views: InterfaceView[]; stale: boolean } {
  let stale = before === null;
  const views = s.interfaces.map((f) => {
    const old = before?.find((b) => b.name === f.name);
    if (!old) stale = true;
    // A stop came or went: its details (who, why) come with the full list.
    if (old && (old.intakeStopped !== null) !== !!f.intakeStopped) stale = true;
    return {
      name: f.name,
      source: old?.source ?? '',
      state: f.state,
      gate: f.gate,
      intakeStopped: f.intakeStopped ? (old?.intakeStopped ?? null) : null,
      received: f.received,
      duplicates: f.duplicates,
      destinations: f.destinations.map((d) => {
        const od = old?.destinations.find((x) => x.name === d.name);
        if (!od || od.paused !== d.paused) stale = true;
        return {
          name: d.name,
          route: od?.route ?? false,
          pending: d.pending,
          quarantined: d.quarantinedNow,
          paused: d.paused,
          pausedInfo: d.paused ? (od?.pausedInfo ?? null) : null,
          sent: d.sent,
          filtered: d.filtered,
          retries: d.retries,
          health: judged(d.health),
          facts: factsOf(d.health, od?.facts ?? null),
          latency: od?.latency ?? null,
        };
      }),
      health: judged(f.health),
    };
  });
  return { views, stale };
}

let source: EventSource | null = null;
let pollTimer: number | undefined;
let users = 0;

export async function refresh(): Promise<void> {
  const r = await call('get', '/api/v1/interfaces');
  const now = live.get();
  if (r.ok) live.set({ ...now, interfaces: fromList(r.data.interfaces), error: null, updatedAt: Date.now() });
  // Unreachable is the banner's to say (connection.ts), not each page's.
  else if (r.status !== 0) live.set({ ...now, error: r.message });
}

// A stream the browser gave up on (the engine was away when it retried,
// or refused it) is tried again once polling gets answers, at most once a
// minute: a session's counts come back to live updates by themselves.
let streamTriedAt = 0;

function poll(): void {
  stopPolling();
  live.set({ ...live.get(), mode: 'polling' });
  const tick = async () => {
    await refresh();
    const streamable = token() === null && typeof EventSource !== 'undefined';
    if (streamable && live.get().error === null && Date.now() - streamTriedAt > 60_000) {
      stopPolling();
      listen();
    }
  };
  void tick();
  pollTimer = window.setInterval(() => void tick(), 5000);
}

function stopPolling(): void {
  if (pollTimer !== undefined) window.clearInterval(pollTimer);
  pollTimer = undefined;
}

function listen(): void {
  if (token() !== null || typeof EventSource === 'undefined') return poll();
  void refresh();
  streamTriedAt = Date.now();
  const es = new EventSource('/api/v1/events');
  source = es;
  live.set({ ...live.get(), mode: 'events' });
  es.addEventListener('snapshot', (e) => {
    let s: Snapshot;
    try {
      s = JSON.parse((e as MessageEvent<string>).data) as Snapshot;
    } catch {
      return;
    }
    heard();
    const { views, stale } = fromSnapshot(s, live.get().interfaces);
    live.set({ ...live.get(), interfaces: views, engineState: s.state, error: null, updatedAt: Date.now() });
    if (stale) void refresh();
  });
  es.onerror = () => {
    // The stream broke: the engine stopped, or the network between. The
    // browser reconnects by itself while the stream can come back; once
    // it gives up (a 401, 503 past 64 streams) polling takes over.
    if (es.readyState === EventSource.CONNECTING) lost('the event stream was cut');
    if (es.readyState === EventSource.CLOSED && source === es) {
      source = null;
      poll();
    }
  };
}

// Counts read before the engine went away are read again when it answers
// (the stream sends its snapshot too, once it has reconnected).
onReconnect(() => {
  if (users === 0) return;
  // A stream the browser gave up on while the engine was away: open it
  // again now rather than after polling's minute.
  if (source === null && token() === null && typeof EventSource !== 'undefined') {
    stopPolling();
    listen();
  } else void refresh();
});

/** Keeps the counts current while at least one page uses them. */
function join(): () => void {
  users++;
  if (users === 1) listen();
  return () => {
    users--;
    if (users === 0) stop();
  };
}

export function stop(): void {
  source?.close();
  source = null;
  stopPolling();
  live.set({ ...live.get(), mode: 'off' });
}

/** The live interfaces, for a page that shows them. */
export function useLive(): LiveState {
  useEffect(() => join(), []);
  return useStore(live);
}
