import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { call } from '../api/client';
import { Badge, ErrorNote, Page, Pager, When, useApi } from '../components/ui';
import { navigate, useLocation, withQuery } from '../router';

const statuses = ['pending', 'sent', 'filtered', 'quarantined', 'duplicate'] as const;
const filters = ['status', 'from', 'to', 'type', 'control_id', 'key'] as const;

// datetime-local has no zone: the browser's own is meant, the API wants RFC 3339.
function toRfc3339(local: string): string {
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? local : d.toISOString();
}

function toLocalInput(rfc: string | null): string {
  if (!rfc) return '';
  const d = new Date(rfc);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export default function Messages({ name }: { name: string }) {
  const { path, query } = useLocation();
  const q = Object.fromEntries(filters.map((k) => [k, query.get(k) ?? ''])) as Record<(typeof filters)[number], string>;
  const before = query.get('before') ?? '';
  const key = path + '?' + query.toString();
  const list = useApi(
    () => call('get', '/api/v1/interfaces/{name}/messages', { path: { name }, query: { ...q, before, limit: 50 } }),
    [key],
  );

  // The form's own values, reset when the address changes.
  const [form, setForm] = useState({ ...q, from: toLocalInput(q.from), to: toLocalInput(q.to) });
  useEffect(() => setForm({ ...q, from: toLocalInput(q.from), to: toLocalInput(q.to) }), [key]);
  const bind = (k: (typeof filters)[number]) => ({
    name: k,
    value: form[k],
    onInput: (e: JSX.TargetedEvent<HTMLInputElement | HTMLSelectElement>) => setForm({ ...form, [k]: e.currentTarget.value }),
  });

  const submit = (e: JSX.TargetedEvent<HTMLFormElement>) => {
    e.preventDefault();
    const params: Record<string, string> = {};
    for (const k of filters) {
      let v = form[k].trim();
      if (v && (k === 'from' || k === 'to')) v = toRfc3339(v);
      params[k] = v;
    }
    navigate(withQuery(path, params));
  };

  const items = list.data?.items ?? [];
  const next = list.data?.next ?? null;
  const filtered = withQuery(path, q);
  return (
    <Page title={`Messages of ${name}`}>
      <form class="filters" onSubmit={submit} aria-label="Filter messages">
        <label class="field">
          <span>Status</span>
          <select {...bind('status')}>
            <option value="">any</option>
            {statuses.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>Received from</span>
          <input type="datetime-local" {...bind('from')} />
        </label>
        <label class="field">
          <span>Received before</span>
          <input type="datetime-local" {...bind('to')} />
        </label>
        <label class="field">
          <span>Type</span>
          <input {...bind('type')} placeholder="ADT^A01" size={10} />
        </label>
        <label class="field">
          <span>Control id</span>
          <input {...bind('control_id')} size={12} />
        </label>
        <label class="field">
          <span>Key</span>
          <input {...bind('key')} size={12} />
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
      <div class="table-wrap">
        <table aria-busy={list.loading}>
          <caption class="visually-hidden">Messages of {name}, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Received</th>
              <th scope="col">Status</th>
              <th scope="col">Type</th>
              <th scope="col">Control id</th>
              <th scope="col">Key</th>
              <th scope="col">Deliveries</th>
              <th scope="col">Last error</th>
            </tr>
          </thead>
          <tbody>
            {items.map((m) => (
              <tr key={m.id} data-message={m.id}>
                <th scope="row" class="nowrap">
                  <a href={`/messages/${m.id}`}>{m.id}</a>
                  {m.originId ? <div class="muted small">copy of {m.originId}</div> : null}
                </th>
                <td>
                  <When at={m.receivedAt} />
                </td>
                <td>{m.status && <Badge value={m.status} />}</td>
                <td class="nowrap">{m.type ?? <span class="muted">–</span>}</td>
                <td class="nowrap">{m.controlId ?? <span class="muted">–</span>}</td>
                <td class="nowrap">{m.key ?? <span class="muted">–</span>}</td>
                <td>
                  {(m.deliveries ?? []).map((d) => (
                    <span key={d.destination} class="delivery">
                      {d.destination} <Badge value={d.status ?? 'pending'} />
                      {d.attempts ? <span class="muted"> ×{d.attempts}</span> : null}
                    </span>
                  ))}
                </td>
                <td class="error-text">{m.lastError ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!list.loading && items.length === 0 && <p class="muted">No message matches.</p>}
      <Pager newest={before ? filtered : null} older={next !== null ? withQuery(path, { ...q, before: next }) : null} />
    </Page>
  );
}
