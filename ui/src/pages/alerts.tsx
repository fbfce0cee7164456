import { useState } from 'preact/hooks';
import { call, type Answer } from '../api/client';
import { Badge, Confirm, ErrorNote, Notice, Page, When, useApi } from '../components/ui';
import { atLeast, me } from '../session';
import { useStore } from '../store';

type Alert = Answer<'/api/v1/alerts'>['alerts'][number];

// What an alert is about, as a person reads it: adt → lab, adt, certificate x.
function subjectOf(a: Alert): string {
  if (a.certificate) return `certificate ${a.certificate}`;
  return a.destination ? `${a.interface ?? ''} → ${a.destination}` : (a.interface ?? a.subject);
}

// How long a silence lasts: the API takes 1m to 30d.
const silences: [string, string][] = [
  ['30m', '30 minutes'],
  ['2h', '2 hours'],
  ['8h', '8 hours'],
  ['1d', '1 day'],
  ['7d', '7 days'],
];

export default function Alerts() {
  const who = useStore(me);
  const operator = atLeast(who, 'operator');
  const list = useApi(() => call('get', '/api/v1/alerts'), []);
  const [asking, setAsking] = useState<{ kind: 'ack' | 'silence'; alert: Alert } | null>(null);
  const [silenceFor, setSilenceFor] = useState('2h');
  const [notice, setNotice] = useState<string | null>(null);
  const alerts = list.data?.alerts ?? null;

  return (
    <Page
      title="Alerts"
      actions={
        <button class="button" onClick={() => void list.reload()}>
          Refresh
        </button>
      }
    >
      <ErrorNote message={list.error} />
      <Notice message={notice} />
      <p class="muted">Firing and recovering first. An acknowledged alert sends no more reminders; a silenced one sends nothing until the silence ends.</p>
      {alerts === null ? (
        <p class="muted">Loading…</p>
      ) : alerts.length === 0 ? (
        <p>No alerts: nothing has fired.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Alerts</caption>
            <thead>
              <tr>
                <th scope="col">Subject</th>
                <th scope="col">Phase</th>
                <th scope="col">State</th>
                <th scope="col">Severity</th>
                <th scope="col">Since</th>
                <th scope="col">Acknowledged</th>
                {operator && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {alerts.map((a) => (
                <tr key={a.id} data-alert={a.id}>
                  <th scope="row">
                    {subjectOf(a)}
                    {a.events?.[0]?.reason && <div class="muted small">{a.events[0].reason}</div>}
                  </th>
                  <td>
                    <Badge value={a.phase} />
                  </td>
                  <td>
                    <Badge value={a.state} />
                  </td>
                  <td>
                    <Badge value={a.severity} />
                  </td>
                  <td>
                    <When at={a.openedAt ?? a.changedAt} />
                  </td>
                  <td data-cell="acknowledged">
                    {a.acknowledgedAt ? (
                      <>
                        by {a.acknowledgedBy} <When at={a.acknowledgedAt} />
                      </>
                    ) : (
                      <span class="muted">no</span>
                    )}
                    {a.silencedUntil && (
                      <div class="muted small">
                        silenced until <When at={a.silencedUntil} />
                      </div>
                    )}
                  </td>
                  {operator && (
                    <td>
                      {a.phase === 'firing' && !a.acknowledgedAt && (
                        <button class="button small" onClick={() => setAsking({ kind: 'ack', alert: a })}>
                          Acknowledge…
                        </button>
                      )}{' '}
                      {a.phase === 'firing' && (
                        <button class="button small" onClick={() => setAsking({ kind: 'silence', alert: a })}>
                          Silence…
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {asking?.kind === 'ack' && (
        <Confirm
          title={`Acknowledge the alert on ${subjectOf(asking.alert)}?`}
          confirmLabel="Acknowledge"
          onConfirm={async () => {
            const r = await call('post', '/api/v1/alerts/{id}/acknowledge', { path: { id: asking.alert.id } });
            if (r.ok) {
              setNotice(`The alert on ${subjectOf(asking.alert)} is acknowledged: no more reminders while it fires.`);
              void list.reload();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>You will be named as the one who saw it; a recovery is still sent.</p>
        </Confirm>
      )}
      {asking?.kind === 'silence' && (
        <Confirm
          title={`Silence the alert on ${subjectOf(asking.alert)}?`}
          confirmLabel="Silence"
          danger
          onConfirm={async () => {
            const r = await call('post', '/api/v1/alerts/{id}/silence', {
              path: { id: asking.alert.id },
              body: { for: silenceFor },
            });
            if (r.ok) {
              setNotice(`The alert on ${subjectOf(asking.alert)} is silenced for ${silenceFor}.`);
              void list.reload();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>Nothing is sent about it until the silence ends; notifications not yet sent are given up.</p>
          <label class="field">
            <span>For</span>
            <select value={silenceFor} onChange={(e) => setSilenceFor(e.currentTarget.value)}>
              {silences.map(([v, label]) => (
                <option key={v} value={v}>
                  {label}
                </option>
              ))}
            </select>
          </label>
        </Confirm>
      )}
    </Page>
  );
}
