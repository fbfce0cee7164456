import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { call, queryString } from '../api/client';
import { Badge, ErrorNote, Page, Pager, When, useApi } from '../components/ui';
import { navigate, useLocation, withQuery } from '../router';

const filters = ['action', 'actor', 'since', 'until'] as const;
type Filters = Record<(typeof filters)[number], string>;

function describe(detail: unknown): string {
  if (!detail || typeof detail !== 'object') return '';
  return Object.entries(detail as Record<string, unknown>)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(', ');
}

// A bulk action's target is its messages' ids, joined by commas (up to
// 500): a link each, the first few shown.
const shownIds = 5;
function MessageLinks({ ids }: { ids: string }) {
  const all = ids.split(',').filter((id) => /^\d+$/.test(id));
  if (all.length === 1) return <a href={`/messages/${all[0]}`}>message {all[0]}</a>;
  return (
    <span data-messages={all.length}>
      {all.length} messages:{' '}
      {all.slice(0, shownIds).map((id, i) => (
        <span key={id}>
          {i > 0 && ', '}
          <a href={`/messages/${id}`}>{id}</a>
        </span>
      ))}
      {all.length > shownIds && ` and ${all.length - shownIds} more`}
    </span>
  );
}

export default function Audit() {
  const { path, query } = useLocation();
  const q = Object.fromEntries(filters.map((k) => [k, query.get(k) ?? ''])) as Filters;
  const before = query.get('before') ?? '';
  const key = query.toString();
  const list = useApi(() => call('get', '/api/v1/audit', { query: { ...q, before, limit: 100 } }), [key]);
  const [form, setForm] = useState<Filters>(q);
  useEffect(() => setForm(q), [key]);
  const bind = (k: keyof Filters) => ({
    name: k,
    value: form[k],
    onInput: (e: JSX.TargetedEvent<HTMLInputElement>) => setForm({ ...form, [k]: e.currentTarget.value }),
  });
  const items = list.data?.items ?? [];
  const next = list.data?.next ?? null;
  const exportHref = '/api/v1/audit' + queryString({ ...q, format: 'ndjson' });
  return (
    <Page
      title="Audit log"
      actions={
        <a class="button" href={exportHref} download="ductus-audit.ndjson" data-external>
          Export (NDJSON)
        </a>
      }
    >
      <form
        class="filters"
        aria-label="Filter the audit log"
        onSubmit={(e) => {
          e.preventDefault();
          navigate(withQuery(path, form));
        }}
      >
        <label class="field">
          <span>Action</span>
          <input {...bind('action')} placeholder="message.dismiss" size={16} />
        </label>
        <label class="field">
          <span>Actor</span>
          <input {...bind('actor')} size={12} />
        </label>
        <label class="field">
          <span>Since (ISO 8601)</span>
          <input {...bind('since')} placeholder="2026-01-01T00:00:00Z" size={20} />
        </label>
        <label class="field">
          <span>Until (ISO 8601)</span>
          <input {...bind('until')} size={20} />
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
          <caption class="visually-hidden">Audit log, newest first</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Actor</th>
              <th scope="col">Action</th>
              <th scope="col">Target</th>
              <th scope="col">Outcome</th>
              <th scope="col">Detail</th>
            </tr>
          </thead>
          <tbody>
            {items.map((a) => (
              <tr key={a.id} data-action={a.action}>
                <td>
                  <When at={a.at} />
                </td>
                <td>
                  {a.actor}
                  <span class="muted">
                    {' '}
                    ({a.actorKind}, {a.via}
                    {a.address ? `, ${a.address}` : ''})
                  </span>
                </td>
                <td>
                  <code>{a.action}</code>
                </td>
                <td>
                  {a.target?.kind === 'message' && a.target.id ? (
                    <MessageLinks ids={a.target.id} />
                  ) : (
                    [a.target?.kind, a.target?.name ?? a.target?.id].filter(Boolean).join(' ')
                  )}
                </td>
                <td>{a.outcome && <Badge value={a.outcome} />}</td>
                <td class="detail">{describe(a.detail)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!list.loading && items.length === 0 && <p class="muted">No row matches.</p>}
      <Pager first={before ? withQuery(path, q) : null} older={next !== null ? withQuery(path, { ...q, before: next }) : null} />
    </Page>
  );
}
