import { useState } from 'preact/hooks';
import { call } from '../api/client';
import { Badge, Confirm, Count, ErrorNote, HealthBadge, Notice, Page, When } from '../components/ui';
import { connection } from '../connection';
import { refresh, useLive, type DestinationView, type InterfaceView, type Timing } from '../live';
import { shownHealth, shownState } from './attention';
import { atLeast, me } from '../session';
import { useStore } from '../store';

type Asking =
  | { kind: 'pause' | 'resume'; iface: string; dest: DestinationView }
  | { kind: 'restart'; iface: string }
  | null;

export default function Interfaces() {
  const who = useStore(me);
  const { interfaces, mode, error } = useLive();
  const lost = useStore(connection).lostAt !== null;
  const [asking, setAsking] = useState<Asking>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const operator = atLeast(who, 'operator');
  const path = (f: string, d: string) => ({ name: f, destination: d });

  return (
    <Page
      title="Interfaces"
      actions={
        <span class="muted live" aria-live="off">
          {lost ? 'Not live' : mode === 'events' ? 'Live' : mode === 'polling' ? 'Refreshed every 5 s' : ''}
        </span>
      }
    >
      <ErrorNote message={error} />
      <Notice message={notice} />
      {interfaces === null ? (
        <p class="muted">Loading…</p>
      ) : interfaces.length === 0 ? (
        <p>This engine runs no interface.</p>
      ) : (
        interfaces.map((f) => (
          <InterfaceCard key={f.name} f={f} operator={operator} onAsk={setAsking} />
        ))
      )}
      {asking?.kind === 'pause' && (
        <Confirm
          title={`Pause ${asking.iface} → ${asking.dest.name}?`}
          confirmLabel="Pause"
          danger
          reason="Reason"
          onConfirm={async (reason) => {
            const r = await call('post', '/api/v1/interfaces/{name}/destinations/{destination}/pause', {
              path: path(asking.iface, asking.dest.name),
              body: { reason },
            });
            if (r.ok) {
              setNotice(`${asking.iface} → ${asking.dest.name} is paused: its deliveries wait until it is resumed.`);
              void refresh();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>Its deliveries are held (kept across restarts) until someone resumes it; messages keep arriving.</p>
        </Confirm>
      )}
      {asking?.kind === 'resume' && (
        <Confirm
          title={`Resume ${asking.iface} → ${asking.dest.name}?`}
          confirmLabel="Resume"
          onConfirm={async () => {
            const r = await call('post', '/api/v1/interfaces/{name}/destinations/{destination}/resume', {
              path: path(asking.iface, asking.dest.name),
            });
            if (r.ok) {
              setNotice(`${asking.iface} → ${asking.dest.name} delivers again.`);
              void refresh();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>Its {asking.dest.pending ?? 'waiting'} pending deliveries go out again.</p>
        </Confirm>
      )}
      {asking?.kind === 'restart' && (
        <Confirm
          title={`Restart ${asking.iface}?`}
          confirmLabel="Restart"
          onConfirm={async () => {
            const r = await call('post', '/api/v1/interfaces/{name}/restart', { path: { name: asking.iface } });
            if (r.ok) {
              setNotice(`${asking.iface} runs again.`);
              void refresh();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>Its code is read from disk again and loaded; what waited is delivered.</p>
        </Confirm>
      )}
    </Page>
  );
}

function InterfaceCard({ f, operator, onAsk }: { f: InterfaceView; operator: boolean; onAsk: (a: Asking) => void }) {
  const id = `iface-${f.name}`;
  const messages = `/interfaces/${encodeURIComponent(f.name)}/messages`;
  return (
    <section class="panel" aria-labelledby={id} data-iface={f.name}>
      <div class="panel-head">
        <h2 id={id}>
          <a href={`/interfaces/${encodeURIComponent(f.name)}`}>{f.name}</a>
        </h2>
        <Badge value={f.state} />
        {f.intakeStopped ? <Badge value="stopped" label="intake stopped" /> : f.gate && <Badge value={f.gate} label={`gate ${f.gate}`} />}
        <span class="muted">{f.source}</span>
        {f.health && (
          <span class="iface-health">
            health <HealthBadge health={shownHealth(f)} />
          </span>
        )}
        <span class="spacer" />
        <span>
          received <strong data-count="received">{f.received.toLocaleString('en')}</strong>
          {f.duplicates ? <span class="muted"> ({f.duplicates} duplicates)</span> : null}
        </span>
        <a class="button" href={messages}>
          Messages
        </a>
        {operator && f.state === 'stopped' && (
          <button class="button" onClick={() => onAsk({ kind: 'restart', iface: f.name })}>
            Restart…
          </button>
        )}
      </div>
      <div class="table-wrap">
        <table>
          <caption class="visually-hidden">Destinations of {f.name}</caption>
          <thead>
            <tr>
              <th scope="col">Destination</th>
              <th scope="col">Health</th>
              <th scope="col" class="num">Pending</th>
              <th scope="col" class="num">Quarantined</th>
              <th scope="col" class="num">Sent</th>
              <th scope="col" class="num">Filtered</th>
              <th scope="col" class="num">Retries</th>
              <th scope="col" class="num">
                <abbr title="Received to finished here, since the engine started: half took at most p50, 95 in 100 at most p95">p50 / p95</abbr>
              </th>
              {operator && <th scope="col">Actions</th>}
            </tr>
          </thead>
          <tbody>
            {f.destinations.map((d) => (
              <tr key={d.name} data-dest={d.name}>
                <th scope="row">
                  {d.name}
                  {d.route && <span class="muted"> (route)</span>}
                </th>
                <td>
                  {shownState(d) === 'failing' ? (
                    <span class="health" data-failing="true">
                      <Badge value="failing" /> <span class="error-text">{d.facts?.lastErrorText}</span>
                    </span>
                  ) : d.health ? (
                    <>
                      <HealthBadge health={d.health} />
                      {d.paused && d.pausedInfo && (
                        <span class="muted">
                          {' '}
                          (by {d.pausedInfo.by} <When at={d.pausedInfo.since} />
                          {d.pausedInfo.reasons.length ? `: ${d.pausedInfo.reasons.map((r) => r.reason).join('; ')}` : ''})
                        </span>
                      )}
                    </>
                  ) : d.paused ? (
                    <>
                      <Badge value="paused" />
                      {d.pausedInfo && (
                        <span class="muted">
                          {' '}
                          by {d.pausedInfo.by} <When at={d.pausedInfo.since} />
                          {d.pausedInfo.reasons.length ? `: ${d.pausedInfo.reasons.map((r) => r.reason).join('; ')}` : ''}
                        </span>
                      )}
                    </>
                  ) : d.quarantined ? (
                    <Badge value="quarantined" label="needs attention" />
                  ) : (
                    <Badge value="ok" label="delivering" />
                  )}
                </td>
                <td class="num" data-count="pending">
                  <Count value={d.pending} />
                </td>
                <td class="num" data-count="quarantined">
                  {d.quarantined ? (
                    <a href={`/quarantine?interface=${encodeURIComponent(f.name)}`}>{d.quarantined.toLocaleString('en')}</a>
                  ) : (
                    <Count value={d.quarantined} />
                  )}
                </td>
                <td class="num" data-count="sent">
                  {d.sent.toLocaleString('en')}
                </td>
                <td class="num">{d.filtered.toLocaleString('en')}</td>
                <td class="num">{d.retries.toLocaleString('en')}</td>
                <td class="num nowrap" data-cell="latency">
                  <Quantiles t={d.latency} />
                </td>
                {operator && (
                  <td>
                    {d.paused ? (
                      <button class="button small" onClick={() => onAsk({ kind: 'resume', iface: f.name, dest: d })}>
                        Resume…
                      </button>
                    ) : (
                      <button class="button small" onClick={() => onAsk({ kind: 'pause', iface: f.name, dest: d })}>
                        Pause…
                      </button>
                    )}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

// Milliseconds as a person reads them: 840 ms, 2.4 s, 7 min.
function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

function Quantiles({ t }: { t: Timing | null }) {
  if (!t || !t.count || t.p50Ms == null || t.p95Ms == null) return <span class="muted">–</span>;
  return (
    <span title={`${t.count.toLocaleString('en')} finished since the engine started`}>
      {duration(t.p50Ms)} / {duration(t.p95Ms)}
    </span>
  );
}
