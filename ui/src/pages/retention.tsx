import { useState } from 'preact/hooks';
import { call, type Answer } from '../api/client';
import { Badge, Confirm, Count, ErrorNote, Notice, Page, When, useApi } from '../components/ui';
import { atLeast, me } from '../session';
import { useStore } from '../store';

type Retention = Answer<'/api/v1/retention'>;
type Tier = Retention['interfaces'][number];
type Period = Retention['periods'][number];

const days: Record<string, number> = { '1w': 7, '3w': 21, '7w': 49 };

// 12.3 MB, as `ductus retention` writes sizes.
function size(bytes: number): string {
  const units = ['bytes', 'kB', 'MB', 'GB', 'TB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${bytes} bytes` : `${v.toFixed(1)} ${units[u]}`;
}

// When a period goes, in an operator's words.
function dropText(p: Period): string {
  if (p.detached) return 'an interrupted drop: finished by the next run';
  if (p.tier === 'held')
    return p.expired && p.unfinished === 0 ? 'next run' : `once the month is over and nothing in it waits${p.expired ? ` (${p.unfinished.toLocaleString('en')} unfinished)` : ''}`;
  if (!p.expired) return p.dropsOn;
  return p.unfinished > 0 ? `next run, after ${p.unfinished.toLocaleString('en')} unfinished rows move to the held area` : 'next run';
}

function changeText(t: Tier): string {
  switch (t.change) {
    case 'waiting':
      return `the project asks for ${t.configured}: waiting for a confirmation`;
    case 'lengthened':
      return `lengthened to ${t.configured}`;
    case 'new':
      return 'new';
    default:
      return '';
  }
}

export default function RetentionPage() {
  const who = useStore(me);
  const operator = atLeast(who, 'operator');
  const view = useApi(() => call('get', '/api/v1/retention'), []);
  const [asking, setAsking] = useState<Tier | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const r = view.data;

  return (
    <Page
      title="Retention"
      actions={
        <button class="button" onClick={() => void view.reload()}>
          Refresh
        </button>
      }
    >
      <ErrorNote message={view.error} />
      <Notice message={notice} />
      <p class="muted">
        Each interface keeps its messages for its tier; whole days (1w) or weeks (3w, 7w) go once older than that. Messages still waiting then, and
        quarantined ones, move to the held area first and are still delivered in order.
      </p>
      {r === null ? (
        <p class="muted">Loading…</p>
      ) : (
        <>
          <h2>Interfaces</h2>
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">Retention of each interface</caption>
              <thead>
                <tr>
                  <th scope="col">Interface</th>
                  <th scope="col">Keeps messages</th>
                  <th scope="col">Change</th>
                  <th scope="col">Quarantined messages</th>
                  {operator && <th scope="col">Actions</th>}
                </tr>
              </thead>
              <tbody>
                {r.interfaces.map((t) => (
                  <tr key={t.interface} data-retention={t.interface}>
                    <th scope="row">{t.interface}</th>
                    <td data-cell="applied">
                      {t.applied} <span class="muted small">({days[t.applied]} days)</span>
                    </td>
                    <td data-cell="change">
                      {t.change === 'waiting' ? <Badge value="paused" label="waiting" /> : null} {changeText(t)}
                      {t.requestedAt && (
                        <div class="muted small">
                          asked since <When at={t.requestedAt} />
                        </div>
                      )}
                    </td>
                    <td>{t.quarantined === 'keep' ? 'held until resent or dismissed' : 'go with their period'}</td>
                    {operator && (
                      <td>
                        {t.change === 'waiting' && (
                          <button class="button small" onClick={() => setAsking(t)}>
                            Confirm {t.configured}…
                          </button>
                        )}
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>

          <h2>Held area</h2>
          {r.held ? (
            <p data-held>
              <Count value={r.held.pending} /> pending and <Count value={r.held.quarantined} /> quarantined messages wait there (
              <Count value={r.held.finished} /> finished, {size(r.held.bytes)}); <Count value={r.held.moved} /> moved there since the engine started.
            </p>
          ) : (
            <p class="muted" data-held>
              Not counted yet: the first run comes 5 s after the engine starts.
            </p>
          )}
          {r.lastRun && (
            <p class="muted small" data-last-run>
              Last run <When at={r.lastRun.at} />:{' '}
              {r.lastRun.busy
                ? 'another engine was running it'
                : `${r.lastRun.dropped} partitions dropped, ${r.lastRun.moved} messages moved to the held area` +
                  (r.lastRun.tierMoved + r.lastRun.tierDeleted > 0
                    ? `, ${r.lastRun.tierMoved} stored messages moved to their interface's new tier and ${r.lastRun.tierDeleted} deleted that it no longer keeps`
                    : '')}
              {r.lastRun.kept.length > 0 && `; still there: ${r.lastRun.kept.join(', ')}`}
              {r.lastRun.failed.length > 0 && `; failed: ${r.lastRun.failed.join('; ')}`}
            </p>
          )}

          <h2>Partitions</h2>
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">Partitions by tier and period (rows are estimates)</caption>
              <thead>
                <tr>
                  <th scope="col">Tier</th>
                  <th scope="col">Period (UTC)</th>
                  <th scope="col" class="num">
                    Messages
                  </th>
                  <th scope="col" class="num">
                    Deliveries
                  </th>
                  <th scope="col" class="num">
                    Size
                  </th>
                  <th scope="col">Drops</th>
                </tr>
              </thead>
              <tbody>
                {r.periods.map((p) => (
                  <tr key={`${p.tier} ${p.from}`} data-period={`${p.tier} ${p.from}`}>
                    <th scope="row">{p.tier}</th>
                    <td>
                      {p.from} to {p.to}
                    </td>
                    <td class="num">
                      <Count value={p.messages} />
                    </td>
                    <td class="num">
                      <Count value={p.deliveries} />
                    </td>
                    <td class="num">{size(p.bytes)}</td>
                    <td>{dropText(p)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      {asking && (
        <Confirm
          title={`Keep the messages of ${asking.interface} ${asking.configured} instead of ${asking.applied}?`}
          confirmLabel={`Confirm ${asking.configured}`}
          danger
          onConfirm={async () => {
            const res = await call('post', '/api/v1/retention/confirm', { body: { interface: asking.interface, tier: asking.configured } });
            if (res.ok) {
              setNotice(`${asking.interface} now keeps its new messages ${asking.configured}.`);
              void view.reload();
            }
            return res;
          }}
          onClose={() => setAsking(null)}
        >
          <p>
            Its new messages are kept {days[asking.configured]} days instead of {days[asking.applied]}, from now on. The messages stored before follow
            at the next retention run: finished ones older than that are deleted, the others move
            {asking.quarantined === 'keep' ? ' (quarantined ones are kept)' : ', and quarantined ones older than that are deleted too'}.
          </p>
        </Confirm>
      )}
    </Page>
  );
}
