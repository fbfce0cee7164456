import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call } from '../api/client';
import { ErrorNote, Page, Pager, useApi } from '../components/ui';
import { MessageTable, TotalLine } from './message_table';

const PAGE = 50;
import { navigate, useLocation, withQuery } from '../router';

const statuses = ['errors', 'pending', 'sent', 'filtered', 'quarantined', 'duplicate'] as const;
const filters = ['status', 'order', 'from', 'to', 'type', 'control_id', 'key'] as const;

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
  const after = query.get('after') ?? '';
  const oldest = q.order === 'oldest';
  // Newest first, a page newer than `after`: read oldest first from it and
  // turn the page around, so "Newer" shows the page just above.
  const turned = !oldest && after !== '';
  const key = path + '?' + query.toString();
  const list = useApi(
    () =>
      call('get', '/api/v1/interfaces/{name}/messages', {
        path: { name },
        query: { ...q, order: turned ? 'oldest' : q.order, before, after, limit: String(PAGE) },
      }),
    [key],
  );
  // A new page starts at its top, its heading focused (as a navigation).
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    window.scrollTo(0, 0);
    document.getElementById('page-title')?.focus({ preventScroll: true });
  }, [key]);

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

  const fetched = list.data?.items ?? [];
  const items = turned ? [...fetched].reverse() : fetched;
  const next = list.data?.next ?? null;
  const filtered = withQuery(path, q);
  const firstId = items[0]?.id;
  const lastId = items[items.length - 1]?.id;
  let newer: string | null = null;
  let older: string | null = null;
  if (oldest) {
    newer = next !== null ? withQuery(path, { ...q, after: String(next) }) : null;
  } else {
    // Newer pages exist when this one is not the first (or, turned, was full).
    if (firstId !== undefined && (before !== '' || (turned && fetched.length === PAGE)))
      newer = withQuery(path, { ...q, after: String(firstId) });
    if (turned ? lastId !== undefined : next !== null) older = withQuery(path, { ...q, before: String(turned ? lastId : next) });
  }
  return (
    <Page title={`Messages of ${name}`}>
      <form class="filters" onSubmit={submit} aria-label="Filter messages">
        <label class="field">
          <span>Status</span>
          <select {...bind('status')}>
            <option value="">any</option>
            {statuses.map((s) => (
              <option key={s} value={s}>
                {s === 'errors' ? 'errors (quarantined or retried)' : s}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>Order</span>
          <select {...bind('order')}>
            <option value="">newest first</option>
            <option value="oldest">oldest first</option>
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
      <TotalLine total={list.data?.total} shown={items.length} />
      <MessageTable items={items} busy={list.loading} caption={`Messages of ${name}, ${oldest ? 'oldest' : 'newest'} first`} />
      {!list.loading && items.length === 0 && <p class="muted">No message matches.</p>}
      <Pager first={before || after ? filtered : null} firstLabel={oldest ? 'Oldest' : 'Newest'} newer={newer} older={older} oldestFirst={oldest} />
    </Page>
  );
}
