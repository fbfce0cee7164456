import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { call, type Answer } from '../api/client';
import { Badge, ErrorNote, Page, Pager, When, useApi } from '../components/ui';
import { useLive } from '../live';
import { navigate, useLocation, withQuery } from '../router';

// The engine's events (GET /api/v1/event-log): what used to be found only
// in its log. Newest first, filtered by kind and interface, a message id a
// link to the message, an interface a link to its page.

type Event = Answer<'/api/v1/event-log'>['events'][number];

/** Each kind in an operator's words, and the colour of its badge (a tone
 * the badges already have: error bad, paused warn, ok, info). */
const kinds: Record<Event['kind'], [label: string, tone: string]> = {
  ar_refused: ['AR refusal', 'paused'],
  delivery_quarantined: ['retries given up', 'error'],
  worker_restarted: ['worker restarted', 'paused'],
  runaway: ['runaway script', 'error'],
  interface_stopped: ['code stopped', 'error'],
  intake_stopped: ['intake stopped', 'paused'],
  intake_started: ['intake started', 'ok'],
  alert_fired: ['alert fired', 'error'],
  alert_resolved: ['alert resolved', 'ok'],
  events_dropped: ['events dropped', 'info'],
};

export function KindBadge({ kind }: { kind: Event['kind'] }) {
  const [label, tone] = kinds[kind] ?? [kind, 'info'];
  return <Badge value={tone} label={label} />;
}

function EventTable({ items, busy, caption, showInterface = true }: { items: Event[]; busy: boolean; caption: string; showInterface?: boolean }) {
  return (
    <div class="table-wrap">
      <table aria-busy={busy}>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">What</th>
            {showInterface && <th scope="col">Interface</th>}
            <th scope="col">Destination</th>
            <th scope="col">Message</th>
            <th scope="col">Detail</th>
          </tr>
        </thead>
        <tbody>
          {items.map((e) => (
            <tr key={e.id} data-event={e.kind}>
              <td>
                <When at={e.at} />
              </td>
              <td>
                <KindBadge kind={e.kind} />
              </td>
              {showInterface && <td>{e.interface ? <a href={`/interfaces/${encodeURIComponent(e.interface)}`}>{e.interface}</a> : <span class="muted">–</span>}</td>}
              <td>{e.destination ?? <span class="muted">–</span>}</td>
              <td>{e.messageId !== null ? <a href={`/messages/${e.messageId}`}>{e.messageId}</a> : <span class="muted">–</span>}</td>
              <td class="detail">{e.detail}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const filters = ['kind', 'interface'] as const;
type Filters = Record<(typeof filters)[number], string>;

export default function Events() {
  const { path, query } = useLocation();
  const { interfaces } = useLive();
  const q = Object.fromEntries(filters.map((k) => [k, query.get(k) ?? ''])) as Filters;
  const before = query.get('before') ?? '';
  const key = query.toString();
  const list = useApi(() => call('get', '/api/v1/event-log', { query: { ...q, before, limit: 100 } }), [key]);
  const [form, setForm] = useState<Filters>(q);
  useEffect(() => setForm(q), [key]);
  const bind = (k: keyof Filters) => ({
    name: k,
    value: form[k],
    onChange: (e: JSX.TargetedEvent<HTMLSelectElement>) => setForm({ ...form, [k]: e.currentTarget.value }),
  });
  const names = (interfaces ?? []).map((i) => i.name);
  if (q.interface && !names.includes(q.interface)) names.push(q.interface);
  const items = list.data?.events ?? [];
  const next = list.data?.next ?? null;
  return (
    <Page title="Events">
      <p class="muted small">
        AR refusals, deliveries given up after their retries, worker restarts, runaway scripts, intake stops and starts, alerts fired and resolved. Kept 30 days (at most 100,000) unless
        the engine's settings say otherwise; the last second's may be lost if the engine crashes.
      </p>
      <form
        class="filters"
        aria-label="Filter the events"
        onSubmit={(e) => {
          e.preventDefault();
          navigate(withQuery(path, form));
        }}
      >
        <label class="field">
          <span>What</span>
          <select {...bind('kind')}>
            <option value="">Everything</option>
            {Object.entries(kinds).map(([k, [label]]) => (
              <option key={k} value={k}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>Interface</span>
          <select {...bind('interface')}>
            <option value="">Every interface</option>
            {names.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
        <div class="field-buttons">
          <button type="submit" class="button primary">
            Filter
          </button>
          <a class="button" href={path}>
            Clear
          </a>
        </div>
      </form>
      <ErrorNote message={list.error} />
      <EventTable items={items} busy={list.loading} caption="The engine's events, newest first" />
      {!list.loading && items.length === 0 && <p class="muted">No event matches.</p>}
      <Pager first={before ? withQuery(path, q) : null} older={next !== null ? withQuery(path, { ...q, before: next }) : null} />
    </Page>
  );
}

/** An interface's last few events, for its page. */
export function RecentEvents({ name }: { name: string }) {
  const list = useApi(() => call('get', '/api/v1/event-log', { query: { interface: name, limit: 5 } }), [name]);
  const items = list.data?.events ?? [];
  return (
    <>
      <ErrorNote message={list.error} />
      {items.length > 0 && <EventTable items={items} busy={list.loading} caption={`The last events of ${name}, newest first`} showInterface={false} />}
      {!list.loading && items.length === 0 && <p class="muted">None kept.</p>}
      <p>
        <a href={`/events?interface=${encodeURIComponent(name)}`}>All events of {name}</a>
      </p>
    </>
  );
}
