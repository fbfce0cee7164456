import { useState } from 'preact/hooks';
import { call } from '../api/client';
import { Badge, Confirm, Count, ErrorNote, HealthBadge, Notice, Page, When, useApi } from '../components/ui';
import { useLive, type InterfaceView } from '../live';
import { AttentionTable, failing, shownHealth, shownState } from './attention';
import { atLeast, me } from '../session';
import { useStore } from '../store';

// The monitor's states, worst first (common/monitor/settings.h), with
// the console's "failing" (attention.tsx) beside stalled.
const worstFirst = ['stopped', 'paused', 'stalled', 'failing', 'error', 'behind', 'intake_stopped', 'late', 'quiet', 'ok'];

function trouble(f: InterfaceView): number {
  // Highest first: what needs a person now; the monitor's judgement first,
  // made worse by a destination whose sends fail now.
  const rankOf = (state: string) => {
    const i = worstFirst.indexOf(state);
    return i < 0 ? worstFirst.length - 1 : i;
  };
  let rank = rankOf(f.health?.state ?? 'ok');
  for (const d of f.destinations) rank = Math.min(rank, rankOf(shownState(d)));
  let score = (worstFirst.length - 1 - rank) * 10000;
  if (f.state === 'stopped') score += 1000;
  if (f.gate === 'closed') score += 100;
  for (const d of f.destinations) {
    if (d.quarantined) score += 10;
    if (d.paused) score += 5;
    if (d.pending === null || d.quarantined === null) score += 1;
  }
  return score;
}

export function needsAttention(f: InterfaceView): string[] {
  const why: string[] = [];
  if (f.state === 'stopped') why.push('stopped');
  if (f.intakeStopped) why.push(`intake stopped by ${f.intakeStopped.by}${f.intakeStopped.reason ? `: ${f.intakeStopped.reason}` : ''}`);
  if (f.gate === 'closed') why.push('gate closed');
  for (const d of f.destinations) {
    if (failing(d)) why.push(`${d.name}: failing (${d.facts?.lastErrorText ?? 'error'})`);
    else if (d.health && d.health.state === 'stalled') why.push(`${d.name}: stalled`);
    if (d.quarantined) why.push(`${d.name}: ${d.quarantined} quarantined`);
    if (d.paused) why.push(`${d.name}: paused`);
  }
  return why;
}

export default function Overview() {
  const who = useStore(me);
  const { interfaces, error: liveError, updatedAt } = useLive();
  const engine = useApi(() => call('get', '/api/v1/engine'), []);
  const drain = useApi(() => call('get', '/api/v1/engine/drain'), []);
  const [asking, setAsking] = useState<null | 'start' | 'stop'>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const e = engine.data;
  const list = interfaces ?? [];
  const totals = list.reduce(
    (t, f) => {
      t.received += f.received;
      for (const d of f.destinations) {
        t.pending += d.pending ?? 0;
        t.quarantined += d.quarantined ?? 0;
        t.sent += d.sent;
      }
      return t;
    },
    { received: 0, pending: 0, quarantined: 0, sent: 0 },
  );
  const sorted = [...list].sort((a, b) => trouble(b) - trouble(a) || a.name.localeCompare(b.name));
  const operator = atLeast(who, 'operator');
  const draining = drain.data?.draining ?? false;
  // Drain is at the foot of the page, with the engines: the first Tab
  // after the heading reaches what needs attention, not the riskiest button.
  const drainButton =
    operator && drain.data ? (
      draining ? (
        <button class="button" onClick={() => setAsking('stop')}>
          Stop draining
        </button>
      ) : (
        <button class="button danger" onClick={() => setAsking('start')}>
          Drain engine…
        </button>
      )
    ) : null;
  return (
    <Page title="Overview">
      <ErrorNote message={engine.error ?? liveError} />
      <Notice message={notice} />
      <section aria-labelledby="attention-h">
        <h2 id="attention-h">Destinations needing attention</h2>
        {interfaces === null ? <p class="muted">Loading…</p> : <AttentionTable list={list} version={updatedAt} />}
      </section>
      <section aria-labelledby="engine-h" class="cards">
        <h2 id="engine-h" class="visually-hidden">
          Engine and totals
        </h2>
        <div class="card">
          <div class="card-label">Engine</div>
          <div class="card-value">{e ? <Badge value={e.state} /> : '…'}</div>
          {e && (
            <div class="card-sub">
              {e.version} ({e.commit}), up since <When at={e.startedAt} />
              {draining && (
                <>
                  {' · '}
                  <Badge value="draining" /> {drain.data?.drained ? 'drained' : `${drain.data?.pending ?? 0} pending`}
                </>
              )}
            </div>
          )}
        </div>
        <div class="card">
          <div class="card-label">Received since start</div>
          <div class="card-value" data-total="received">
            <Count value={totals.received} />
          </div>
        </div>
        <div class="card">
          <div class="card-label">Pending now</div>
          <div class="card-value" data-total="pending">
            <Count value={totals.pending} />
          </div>
        </div>
        <div class="card">
          <div class="card-label">Quarantined now</div>
          <div class="card-value" data-total="quarantined">
            {totals.quarantined ? <a href="/quarantine">{totals.quarantined.toLocaleString('en')}</a> : 0}
          </div>
        </div>
      </section>

      <section aria-labelledby="ifaces-h">
        <h2 id="ifaces-h">Interfaces, those needing attention first</h2>
        {interfaces === null ? (
          <p class="muted">Loading…</p>
        ) : (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Interface</th>
                  <th scope="col">State</th>
                  <th scope="col">Health</th>
                  <th scope="col">Gate</th>
                  <th scope="col" class="num">Received</th>
                  <th scope="col" class="num">Pending</th>
                  <th scope="col" class="num">Quarantined</th>
                  <th scope="col">Attention</th>
                </tr>
              </thead>
              <tbody>
                {sorted.map((f) => {
                  const why = needsAttention(f);
                  const pending = f.destinations.reduce((n, d) => n + (d.pending ?? 0), 0);
                  const quarantined = f.destinations.reduce((n, d) => n + (d.quarantined ?? 0), 0);
                  return (
                    <tr key={f.name} data-iface={f.name}>
                      <th scope="row">
                        <a href={`/interfaces/${encodeURIComponent(f.name)}/messages`}>{f.name}</a>
                      </th>
                      <td>
                        <Badge value={f.state} />
                      </td>
                      <td data-cell="health">
                        <HealthBadge health={shownHealth(f)} />
                      </td>
                      <td>{f.gate ? <Badge value={f.gate} /> : <span class="muted">–</span>}</td>
                      <td class="num" data-count="received">
                        {f.received.toLocaleString('en')}
                      </td>
                      <td class="num">{pending.toLocaleString('en')}</td>
                      <td class="num">
                        {quarantined ? (
                          <a href={`/quarantine?interface=${encodeURIComponent(f.name)}`}>{quarantined.toLocaleString('en')}</a>
                        ) : (
                          0
                        )}
                      </td>
                      <td>{why.length ? why.join('; ') : <span class="muted">none</span>}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </section>

      {e && (
        <section aria-labelledby="engines-h">
          <div class="section-head">
            <h2 id="engines-h">Engines on this database</h2>
            {drainButton}
          </div>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Engine</th>
                  <th scope="col">Process</th>
                  <th scope="col">Version</th>
                  <th scope="col">Started</th>
                  <th scope="col">Interfaces</th>
                </tr>
              </thead>
              <tbody>
                <tr>
                  <th scope="row">
                    {e.engineId} <span class="muted">(this one)</span>
                  </th>
                  <td>
                    {e.workers.length} workers: {e.workers.map((w) => `${w.group}/${w.slot} ${w.state}`).join(', ')}
                  </td>
                  <td>{e.version}</td>
                  <td>
                    <When at={e.startedAt} />
                  </td>
                  <td>ownership {e.ownership}</td>
                </tr>
                {e.otherEngines.map((o) => (
                  <tr key={o.id}>
                    <th scope="row">{o.id}</th>
                    <td>
                      {o.host} pid {o.pid}
                    </td>
                    <td>{o.version}</td>
                    <td>
                      <When at={o.startedAt} />
                    </td>
                    <td>{o.interfaces.join(', ') || <span class="muted">none</span>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      )}

      {asking === 'start' && (
        <Confirm
          title="Drain the engine?"
          confirmLabel="Start draining"
          danger
          onConfirm={async () => {
            const r = await call('post', '/api/v1/engine/drain', { body: { stop: false } });
            if (r.ok) {
              setNotice('Draining: every intake gate is closed until the drain is stopped.');
              void drain.reload();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>Every intake gate closes (MLLP answers AE, HTTP 503) and the queues empty out. Senders will retry.</p>
        </Confirm>
      )}
      {asking === 'stop' && (
        <Confirm
          title="Stop draining?"
          confirmLabel="Open the gates"
          onConfirm={async () => {
            const r = await call('delete', '/api/v1/engine/drain');
            if (r.ok) {
              setNotice('The gates are open again.');
              void drain.reload();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>The intake gates open again and messages are accepted.</p>
        </Confirm>
      )}
    </Page>
  );
}
