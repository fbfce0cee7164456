import { useEffect, useState } from 'preact/hooks';
import { call, type Answer } from '../api/client';
import { Badge, useApi, When } from '../components/ui';
import type { DestinationView, InterfaceView } from '../live';

// The Overview's first table: each destination that needs a person, the
// worst first, with what to act on (the receiver's error, how long the
// head message has waited and how often it was tried). The monitor judges
// a backlog "stalled" only after a minute; a receiver refusing right now
// is shown as failing from its first error, from the same facts.

type Hotspot = Answer<'/api/v1/hotspots'>['destinations'][number];

// The monitor's states, worst first (common/monitor/settings.h), with
// "failing" beside stalled: a backlog whose newest event is an error.
const order = ['stopped', 'paused', 'stalled', 'failing', 'error', 'behind', 'intake_stopped', 'late', 'quiet', 'ok'];

/** Its sends fail now: something waits and the last error is newer than
 * the last send. */
export function failing(d: DestinationView): boolean {
  const f = d.facts;
  if (!f || f.waiting === 0 || !f.lastError) return false;
  return !f.lastSent || Date.parse(f.lastError) > Date.parse(f.lastSent);
}

/** The state the console shows: the monitor's, or failing when that says
 * less (ok, behind) while sends fail. */
export function shownState(d: DestinationView): string {
  const s = d.health?.state ?? (d.paused ? 'paused' : 'ok');
  if (failing(d) && order.indexOf(s) > order.indexOf('failing')) return 'failing';
  return s;
}

/** An interface's health as the console shows it: the monitor's, or
 * failing when one of its destinations fails and the monitor says less. */
export function shownHealth(f: InterfaceView): { state: string; reason: string } | null {
  const bad = f.destinations.find(failing);
  const s = f.health?.state ?? 'ok';
  if (bad && order.indexOf(s) > order.indexOf('failing'))
    return { state: 'failing', reason: `${bad.name}: ${bad.facts?.lastErrorText ?? 'its sends fail'}` };
  return f.health;
}

export interface Attention {
  iface: InterfaceView;
  dest: DestinationView;
  state: string;
}

/** Destinations needing attention, worst first; then most waiting. */
export function needing(list: InterfaceView[]): Attention[] {
  const out: Attention[] = [];
  for (const iface of list)
    for (const dest of iface.destinations) {
      const state = shownState(dest);
      if (state !== 'ok' || (dest.quarantined ?? 0) > 0) out.push({ iface, dest, state });
    }
  const rank = (a: Attention) => order.indexOf(a.state);
  return out.sort(
    (a, b) =>
      rank(a) - rank(b) ||
      (b.dest.facts?.waiting ?? b.dest.pending ?? 0) - (a.dest.facts?.waiting ?? a.dest.pending ?? 0) ||
      a.iface.name.localeCompare(b.iface.name) ||
      a.dest.name.localeCompare(b.dest.name),
  );
}

function age(at: string): string {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(at)) / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}

/** "next retry in 12 s", from the time the engine will try again. */
export function nextRetry(at: string | null | undefined, now: number): string | null {
  if (!at) return null;
  const s = Math.round((Date.parse(at) - now) / 1000);
  if (Number.isNaN(s)) return null;
  if (s <= 0) return 'retrying now';
  return s < 120 ? `next retry in ${s} s` : `next retry in ${Math.round(s / 60)} min`;
}

export function AttentionTable({ list, version }: { list: InterfaceView[]; version: number }) {
  const rows = needing(list);
  // Where each backlog's head is: read again when the counts change, at
  // most every 5 s, and not at all while nothing waits.
  const anyWaiting = rows.some((r) => (r.dest.facts?.waiting ?? r.dest.pending ?? 0) > 0);
  const spots = useApi(
    () => (anyWaiting ? call('get', '/api/v1/hotspots') : Promise.resolve({ ok: true as const, data: { destinations: [] } })),
    [anyWaiting],
  );
  useEffect(() => {
    if (!anyWaiting) return;
    const t = window.setTimeout(() => void spots.reload(), 5000);
    return () => window.clearTimeout(t);
  }, [version, anyWaiting]);
  const spotOf = (r: Attention): Hotspot | undefined =>
    spots.data?.destinations.find((h) => h.interface === r.iface.name && h.destination === r.dest.name);
  // The countdown to a retry moves each second while one is due.
  const [now, setNow] = useState(Date.now());
  const retrying = spots.data?.destinations.some((h) => h.lanes.some((l) => l.nextRetryAt)) ?? false;
  useEffect(() => {
    if (!retrying) return;
    const t = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(t);
  }, [retrying]);

  if (rows.length === 0) return <p class="muted">Every destination is delivering.</p>;
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Destination</th>
            <th scope="col">State</th>
            <th scope="col">Last error</th>
            <th scope="col" class="num">Waiting</th>
            <th scope="col">Oldest waiting</th>
            <th scope="col">Head message</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => {
            const f = r.dest.facts;
            const spot = spotOf(r);
            // The head of the busiest lane: the message its worker is on.
            const head = spot?.lanes.reduce<(typeof spot.lanes)[number] | undefined>(
              (h, l) => (!h || l.firstMessageId < h.firstMessageId ? l : h),
              undefined,
            );
            const waiting = f?.waiting ?? r.dest.pending ?? 0;
            return (
              <tr key={`${r.iface.name}/${r.dest.name}`} data-attention={`${r.iface.name}/${r.dest.name}`}>
                <th scope="row">
                  <a href={`/interfaces/${encodeURIComponent(r.iface.name)}/messages`}>{r.iface.name}</a>
                  <span class="muted"> → </span>
                  {r.dest.name}
                  {r.dest.quarantined ? (
                    <div class="small">
                      <a href={`/quarantine?interface=${encodeURIComponent(r.iface.name)}`}>{r.dest.quarantined.toLocaleString('en')} quarantined</a>
                    </div>
                  ) : null}
                </th>
                <td data-cell="state">
                  <Badge value={r.state} />
                  {r.dest.health?.reason && r.state !== 'failing' && <div class="small muted">{r.dest.health.reason}</div>}
                </td>
                <td data-cell="last-error">
                  {f?.lastErrorText ? (
                    <>
                      <span class="error-text">{f.lastErrorText}</span>{' '}
                      <span class="muted small">
                        (<When at={f.lastError} />)
                      </span>
                    </>
                  ) : (
                    <span class="muted">none</span>
                  )}
                </td>
                <td class="num" data-count="waiting">
                  {waiting.toLocaleString('en')}
                </td>
                <td>{head ? `${age(head.firstReceivedAt)}` : f?.oldestSeconds != null ? `${Math.round(f.oldestSeconds)} s` : <span class="muted">–</span>}</td>
                <td data-cell="head">
                  {head ? (
                    <>
                      <a href={`/messages/${head.firstMessageId}`}>{head.firstMessageId}</a>{' '}
                      <span class="muted">
                        {head.firstAttempts} {head.firstAttempts === 1 ? 'attempt' : 'attempts'}
                        {spot && spot.lanes.length > 1 ? `, ${spot.lanes.length} lanes waiting` : ''}
                      </span>
                      {nextRetry(head.nextRetryAt, now) && (
                        <div class="small" data-next-retry={head.nextRetryAt}>
                          {nextRetry(head.nextRetryAt, now)}
                        </div>
                      )}
                    </>
                  ) : (
                    <span class="muted">–</span>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
