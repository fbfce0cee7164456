import { useState } from 'preact/hooks';
import { call } from '../api/client';
import { Badge, Confirm, ErrorNote, HealthBadge, Notice, Page, useApi, When } from '../components/ui';
import { refresh, useLive } from '../live';
import { atLeast, me } from '../session';
import { useStore } from '../store';
import { shownHealth } from './attention';
import { RecentEvents } from './events';
import { TrafficChart } from './traffic';

// One interface: its state and health, its intake stopped or started by an
// operator, its traffic over the last hour, day or week, and its
// configuration as the engine runs it (read-only, secrets shown as ***).

export default function Interface({ name }: { name: string }) {
  const who = useStore(me);
  const { interfaces } = useLive();
  const f = interfaces?.find((i) => i.name === name) ?? null;
  const config = useApi(() => call('get', '/api/v1/interfaces/{name}/configuration', { path: { name } }), [name]);
  const [asking, setAsking] = useState<null | 'stop' | 'start'>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const operator = atLeast(who, 'operator');
  const stopped = f?.intakeStopped ?? null;
  const internal = f?.source === 'internal';
  return (
    <Page
      title={`Interface ${name}`}
      actions={
        <>
          <a class="button" href={`/interfaces/${encodeURIComponent(name)}/messages`}>
            Messages
          </a>
          {operator && f && !internal && (
            <button class={stopped ? 'button' : 'button danger'} onClick={() => setAsking(stopped ? 'start' : 'stop')}>
              {stopped ? 'Start intake…' : 'Stop intake…'}
            </button>
          )}
        </>
      }
    >
      <Notice message={notice} />
      {interfaces !== null && !f && <ErrorNote message={`This engine runs no interface ${name}.`} />}
      {f && (
        <section class="panel" aria-label="State" data-iface={f.name}>
          <div class="panel-head">
            <Badge value={f.state} />
            {stopped ? <Badge value="stopped" label="intake stopped" /> : f.gate && <Badge value={f.gate} label={`gate ${f.gate}`} />}
            <span class="muted">{f.source}</span>
            <span class="iface-health">
              health <HealthBadge health={shownHealth(f)} />
            </span>
          </div>
          {stopped && (
            <p class="note warn" data-intake="stopped">
              Its intake was stopped by {stopped.by} <When at={stopped.since} />
              {stopped.reason ? `: ${stopped.reason}` : ''}. Nothing is received until it is started; what it stored is still delivered.
            </p>
          )}
        </section>
      )}

      <section aria-labelledby="traffic-h">
        <h2 id="traffic-h">Traffic</h2>
        <TrafficChart name={name} />
      </section>

      <section aria-labelledby="events-h">
        <h2 id="events-h">Recent events</h2>
        <RecentEvents name={name} />
      </section>

      <section aria-labelledby="config-h">
        <h2 id="config-h">Configuration</h2>
        <p class="muted small">As the engine loaded it at its start; passwords, keys and header values read ***.</p>
        <ErrorNote message={config.error} />
        {config.data && <Settings value={config.data as Record<string, unknown>} />}
      </section>

      {asking === 'stop' && (
        <Confirm
          title={`Stop the intake of ${name}?`}
          confirmLabel="Stop intake"
          danger
          reason="Reason"
          onConfirm={async (reason) => {
            const r = await call('post', '/api/v1/interfaces/{name}/stop', { path: { name }, body: reason ? { reason } : {} });
            if (r.ok) {
              setNotice(`${name} takes no messages until its intake is started: its port is closed (MLLP) or answers 503 (HTTP). Senders will retry.`);
              void refresh();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>Its listener closes (kept across restarts) until someone starts it again. What it already stored is still delivered.</p>
        </Confirm>
      )}
      {asking === 'start' && (
        <Confirm
          title={`Start the intake of ${name}?`}
          confirmLabel="Start intake"
          onConfirm={async () => {
            const r = await call('post', '/api/v1/interfaces/{name}/start', { path: { name } });
            if (r.ok) {
              setNotice(`${name} takes messages again.`);
              void refresh();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>Its listener opens on the same address and messages are accepted again.</p>
        </Confirm>
      )}
    </Page>
  );
}

const labels: Record<string, string> = {
  maxMessageBytes: 'max message bytes',
  dedicatedPools: 'dedicated pools',
  activeWithin: 'active within',
  activeBy: 'active by',
  maxAttempts: 'max attempts',
  rateLimit: 'rate limit',
  saveOutput: 'save output',
  fileName: 'file name',
  privateKey: 'private key',
  hostKey: 'host key',
};

function label(key: string): string {
  return labels[key] ?? key;
}

function Value({ v }: { v: unknown }) {
  if (v === null || v === undefined) return <span class="muted">–</span>;
  if (typeof v === 'boolean') return <>{v ? 'yes' : 'no'}</>;
  if (typeof v === 'string' || typeof v === 'number') return <>{String(v)}</>;
  if (Array.isArray(v)) return v.length ? <>{v.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(', ')}</> : <span class="muted">none</span>;
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length === 0) return <span class="muted">none</span>;
  return (
    <dl class="settings nested">
      {entries.flatMap(([k, x]) => [
        <dt key={`t${k}`}>{label(k)}</dt>,
        <dd key={`d${k}`}>
          <Value v={x} />
        </dd>,
      ])}
    </dl>
  );
}

function Settings({ value }: { value: Record<string, unknown> }) {
  const { destinations, name: _name, ...rest } = value;
  const list = Array.isArray(destinations) ? (destinations as Record<string, unknown>[]) : [];
  return (
    <>
      <div class="panel" data-config="interface">
        <Value v={rest} />
      </div>
      {list.map((d) => (
        <div class="panel" key={String(d['name'])} data-config-destination={String(d['name'])}>
          <h3>Destination {String(d['name'])}</h3>
          <Value v={Object.fromEntries(Object.entries(d).filter(([k]) => k !== 'name'))} />
        </div>
      ))}
    </>
  );
}
