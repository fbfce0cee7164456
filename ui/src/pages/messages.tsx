import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, queryString, token, type Result } from '../api/client';
import { Confirm, ErrorNote, Notice, Page, Pager, useApi } from '../components/ui';
import { useLive } from '../live';
import { navigate, useLocation, withQuery } from '../router';
import { atLeast, may, me, viaToken } from '../session';
import { useStore } from '../store';
import { BULK_MAX, BulkRun, collectIds, outcomeText, RESEND_BATCH, resendAll } from './bulk';
import { MessageTable, TotalLine } from './message_table';

const PAGE = 50;

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

/** A file the API gives: a plain link for a session (the browser streams
 * it to disk with the cookie), fetched with the token otherwise (a link
 * can't send an Authorization header). */
async function download(url: string, fallbackName: string): Promise<Result<null>> {
  const t = token();
  if (!viaToken() || !t) {
    const a = document.createElement('a');
    a.href = url;
    a.download = fallbackName;
    document.body.append(a);
    a.click();
    a.remove();
    return { ok: true, data: null };
  }
  let r: Response;
  try {
    r = await fetch(url, { headers: { Authorization: `Bearer ${t}` } });
  } catch {
    return { ok: false, status: 0, error: 'network', message: 'The engine could not be reached.' };
  }
  if (!r.ok) {
    const e = (await r.json().catch(() => ({}))) as { error?: string; message?: string };
    return { ok: false, status: r.status, error: e.error ?? `http_${r.status}`, message: e.message ?? `${r.status} ${r.statusText}` };
  }
  const blob = await r.blob();
  const name = /filename="([^"]+)"/.exec(r.headers.get('Content-Disposition') ?? '')?.[1] ?? fallbackName;
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
  return { ok: true, data: null };
}

export default function Messages({ name }: { name: string }) {
  const who = useStore(me);
  const { interfaces } = useLive();
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
  // Acting on every match, not the page: the filter as it stands (no cursor).
  const filterQuery = Object.fromEntries(filters.map((k) => [k, q[k]]).filter(([, v]) => v !== '')) as Record<string, string>;
  const total = list.data?.total;
  const destinations = interfaces?.find((f) => f.name === name)?.destinations.map((d) => d.name) ?? [];
  const [asking, setAsking] = useState<null | 'export' | 'resend'>(null);
  const [format, setFormat] = useState<'csv' | 'ndjson'>('csv');
  const [withPayloads, setWithPayloads] = useState(false);
  const [which, setWhich] = useState<'quarantined' | 'chosen'>('quarantined');
  const [chosen, setChosen] = useState<string[]>([]);
  const [bulk, setBulk] = useState<null | { destinations?: string[]; reason?: string }>(null);
  const [notice, setNotice] = useState<string | null>(null);
  useEffect(() => setNotice(null), [key]);
  const matches = total ? (total.exact ? total.count.toLocaleString('en') : `More than ${total.count.toLocaleString('en')}`) : '';
  const exportUrl = `/api/v1/interfaces/${encodeURIComponent(name)}/messages/export${queryString({
    ...filterQuery,
    format,
    include: withPayloads ? 'payload' : undefined,
  })}`;

  return (
    <Page
      title={`Messages of ${name}`}
      actions={
        <>
          <button type="button" class="button" onClick={() => setAsking('export')} disabled={!total?.count}>
            Export…
          </button>
          {atLeast(who, 'operator') && (
            <button type="button" class="button" onClick={() => setAsking('resend')} disabled={!total?.count}>
              Resend all matching…
            </button>
          )}
        </>
      }
    >
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
      <Notice message={notice} />
      <TotalLine total={list.data?.total} shown={items.length} />
      <MessageTable items={items} busy={list.loading} caption={`Messages of ${name}, ${oldest ? 'oldest' : 'newest'} first`} />
      {!list.loading && items.length === 0 && <p class="muted">No message matches.</p>}
      <Pager first={before || after ? filtered : null} firstLabel={oldest ? 'Oldest' : 'Newest'} newer={newer} older={older} oldestFirst={oldest} />

      {asking === 'export' && (
        <Confirm
          title={`Export the messages of ${name}`}
          confirmLabel="Download"
          onConfirm={() => download(exportUrl, `${name}-messages.${format}`)}
          onClose={() => setAsking(null)}
        >
          <p>
            {matches} {total?.count === 1 ? 'message matches' : 'messages match'} this filter; an export gives at most {BULK_MAX.toLocaleString('en')}, {oldest ? 'oldest' : 'newest'} first.
          </p>
          <fieldset class="choices">
            <legend>Format</legend>
            <label class="inline">
              <input type="radio" name="format" value="csv" checked={format === 'csv'} onChange={() => setFormat('csv')} /> CSV (a spreadsheet)
            </label>
            <label class="inline">
              <input type="radio" name="format" value="ndjson" checked={format === 'ndjson'} onChange={() => setFormat('ndjson')} /> NDJSON (a JSON object a line)
            </label>
          </fieldset>
          {may(who, 'payloads') && (
            <label class="inline">
              <input type="checkbox" name="payloads" checked={withPayloads} onChange={(e) => setWithPayloads(e.currentTarget.checked)} /> Include each payload (recorded in the audit log)
            </label>
          )}
        </Confirm>
      )}
      {asking === 'resend' && (
        <Confirm
          title={`Resend every matching message of ${name}`}
          confirmLabel="Resend all"
          reason="Reason (kept in the audit log)"
          reasonOptional
          onConfirm={async (reason) => {
            if (which === 'chosen' && chosen.length === 0) return { ok: false as const, status: 400, error: 'invalid', message: 'Choose at least one destination.' };
            setBulk({ ...(which === 'chosen' ? { destinations: chosen } : {}), ...(reason ? { reason } : {}) });
          }}
          onClose={() => setAsking(null)}
        >
          <p>
            {matches} {total?.count === 1 ? 'message matches' : 'messages match'} this filter. They are resent {RESEND_BATCH} at a time, oldest first; you can cancel between batches.
          </p>
          <fieldset class="choices">
            <legend>Deliveries to resend</legend>
            <label class="inline">
              <input type="radio" name="which" value="quarantined" checked={which === 'quarantined'} onChange={() => setWhich('quarantined')} /> Their quarantined deliveries
            </label>
            <label class="inline">
              <input type="radio" name="which" value="chosen" checked={which === 'chosen'} onChange={() => setWhich('chosen')} /> To these destinations, whatever they ended as:
            </label>
            {destinations.map((dest) => (
              <label key={dest} class="inline indent">
                <input
                  type="checkbox"
                  name="destination"
                  value={dest}
                  disabled={which !== 'chosen'}
                  checked={chosen.includes(dest)}
                  onChange={(e) => setChosen(e.currentTarget.checked ? [...chosen, dest] : chosen.filter((x) => x !== dest))}
                />{' '}
                {dest}
              </label>
            ))}
          </fieldset>
        </Confirm>
      )}
      {bulk && (
        <BulkRun
          title={`Resending the matching messages of ${name}`}
          verb="resent"
          nothing="had nothing to resend"
          run={async (report, cancelled) => {
            const found = await collectIds(
              async (cursor) => {
                const r = await call('get', '/api/v1/interfaces/{name}/messages', {
                  path: { name },
                  query: { ...filterQuery, order: 'oldest', after: cursor === null ? undefined : String(cursor), limit: '500' },
                });
                return r.ok ? { ok: true as const, data: { ids: r.data.items.map((m) => m.id), next: r.data.next } } : r;
              },
              report,
              cancelled,
            );
            if (found.error) return found.error;
            return resendAll(found.ids, bulk, report, cancelled);
          }}
          onClose={(o) => {
            setBulk(null);
            if (o) setNotice(outcomeText(o, 'resent', 'had nothing to resend'));
            void list.reload();
          }}
        />
      )}
    </Page>
  );
}
