import { useEffect, useState } from 'preact/hooks';
import { call } from '../api/client';
import { Badge, Confirm, ErrorNote, Notice, Page, Pager, When, useApi } from '../components/ui';
import { useLive } from '../live';
import { navigate, useLocation, withQuery } from '../router';
import { atLeast, may, me } from '../session';
import { useStore } from '../store';
import { BulkRun, collectIds, dismissAll, outcomeText, resendAll } from './bulk';

interface Row {
  messageId: number;
  interface: string;
  receivedAt: string;
  deliveries: { destination: string; attempts: number; lastError: string | null; updatedAt: string | null }[];
}

type Asking = { kind: 'resend' | 'dismiss'; ids: number[] } | { kind: 'resend-all' | 'dismiss-all' } | null;

/** Every quarantined message (of one interface, when named), page after page. */
function everyQuarantined(iface: string) {
  return async (cursor: number | null) => {
    const r = await call('get', '/api/v1/quarantine', { query: { interface: iface, before: cursor ?? undefined, limit: 500 } });
    if (!r.ok) return r;
    const ids = [...new Set((r.data.items ?? []).map((d) => d.messageId ?? 0))];
    return { ok: true as const, data: { ids, next: r.data.next ?? null } };
  };
}

export default function Quarantine() {
  const who = useStore(me);
  const { path, query } = useLocation();
  const { interfaces } = useLive();
  const iface = query.get('interface') ?? '';
  const before = query.get('before') ?? '';
  const list = useApi(() => call('get', '/api/v1/quarantine', { query: { interface: iface, before, limit: 100 } }), [iface, before]);
  const [selected, setSelected] = useState<Set<number>>(new Set());
  const [asking, setAsking] = useState<Asking>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [bulk, setBulk] = useState<null | { kind: 'resend' | 'dismiss'; reason: string }>(null);
  useEffect(() => setSelected(new Set()), [iface, before]);

  // One row per message: the API lists each quarantined delivery.
  const rows: Row[] = [];
  for (const d of list.data?.items ?? []) {
    const id = d.messageId ?? 0;
    let row = rows.find((r) => r.messageId === id);
    if (!row) {
      row = { messageId: id, interface: d.interface ?? '', receivedAt: d.receivedAt ?? '', deliveries: [] };
      rows.push(row);
    }
    row.deliveries.push({
      destination: d.destination ?? '',
      attempts: d.attempts ?? 0,
      lastError: d.lastError ?? null,
      updatedAt: d.updatedAt ?? null,
    });
  }
  const operator = atLeast(who, 'operator');
  const canEdit = operator && may(who, 'payloads');
  const allChecked = rows.length > 0 && rows.every((r) => selected.has(r.messageId));
  const toggle = (id: number) => {
    const s = new Set(selected);
    if (s.has(id)) s.delete(id);
    else s.add(id);
    setSelected(s);
  };
  const next = list.data?.next ?? null;
  const ids = [...selected];

  return (
    <Page title="Quarantine">
      <form
        class="filters"
        aria-label="Filter the quarantine"
        onSubmit={(e) => {
          e.preventDefault();
          const v = new FormData(e.currentTarget).get('interface');
          navigate(withQuery(path, { interface: String(v ?? '') }));
        }}
      >
        <label class="field">
          <span>Interface</span>
          <select name="interface" value={iface} onChange={(e) => navigate(withQuery(path, { interface: e.currentTarget.value }))}>
            <option value="">all</option>
            {(interfaces ?? []).map((f) => (
              <option key={f.name} value={f.name}>
                {f.name}
              </option>
            ))}
          </select>
        </label>
        {operator && (
          <div class="field-buttons bulk" role="group" aria-label="With the selected messages">
            <span class="muted">{ids.length} selected</span>
            <button type="button" class="button primary" disabled={!ids.length} onClick={() => setAsking({ kind: 'resend', ids })}>
              Resend selected…
            </button>
            <button type="button" class="button danger" disabled={!ids.length} onClick={() => setAsking({ kind: 'dismiss', ids })}>
              Dismiss selected…
            </button>
            <button type="button" class="button" disabled={!rows.length} onClick={() => setAsking({ kind: 'resend-all' })}>
              Resend all…
            </button>
            <button type="button" class="button danger" disabled={!rows.length} onClick={() => setAsking({ kind: 'dismiss-all' })}>
              Dismiss all…
            </button>
          </div>
        )}
      </form>
      <ErrorNote message={list.error} />
      <Notice message={notice} />
      <div class="table-wrap">
        <table aria-busy={list.loading}>
          <caption class="visually-hidden">Quarantined messages, newest first</caption>
          <thead>
            <tr>
              {operator && (
                <th scope="col" class="check">
                  <input
                    type="checkbox"
                    aria-label="Select all on this page"
                    checked={allChecked}
                    onChange={() => setSelected(allChecked ? new Set() : new Set(rows.map((r) => r.messageId)))}
                  />
                </th>
              )}
              <th scope="col">Message</th>
              <th scope="col">Interface</th>
              <th scope="col">Received</th>
              <th scope="col">Destination</th>
              <th scope="col" class="num">Attempts</th>
              <th scope="col">Last error</th>
              {operator && <th scope="col">Actions</th>}
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.messageId} data-message={r.messageId}>
                {operator && (
                  <td class="check">
                    <input
                      type="checkbox"
                      aria-label={`Select message ${r.messageId}`}
                      checked={selected.has(r.messageId)}
                      onChange={() => toggle(r.messageId)}
                    />
                  </td>
                )}
                <th scope="row">
                  <a href={`/messages/${r.messageId}`}>{r.messageId}</a>
                </th>
                <td>{r.interface}</td>
                <td>
                  <When at={r.receivedAt} />
                </td>
                <td>
                  {r.deliveries.map((d) => (
                    <div key={d.destination}>
                      {d.destination} <Badge value="quarantined" />
                    </div>
                  ))}
                </td>
                <td class="num">
                  {r.deliveries.map((d) => (
                    <div key={d.destination}>{d.attempts}</div>
                  ))}
                </td>
                <td class="error-text">
                  {r.deliveries.map((d) => (
                    <div key={d.destination}>{d.lastError ?? ''}</div>
                  ))}
                </td>
                {operator && (
                  <td class="actions">
                    <button class="button small" onClick={() => setAsking({ kind: 'resend', ids: [r.messageId] })}>
                      Resend
                    </button>
                    {canEdit && (
                      <a class="button small" href={`/messages/${r.messageId}?edit=1`}>
                        Edit
                      </a>
                    )}
                    <button class="button small" onClick={() => setAsking({ kind: 'dismiss', ids: [r.messageId] })}>
                      Dismiss
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!list.loading && rows.length === 0 && <p class="muted">Nothing is quarantined{iface ? ` in ${iface}` : ''}.</p>}
      <Pager first={before ? withQuery(path, { interface: iface }) : null} older={next !== null ? withQuery(path, { interface: iface, before: next }) : null} />

      {(asking?.kind === 'resend-all' || asking?.kind === 'dismiss-all') && (
        <Confirm
          title={`${asking.kind === 'resend-all' ? 'Resend' : 'Dismiss'} every quarantined message${iface ? ` of ${iface}` : ''}?`}
          confirmLabel={asking.kind === 'resend-all' ? 'Resend all' : 'Dismiss all'}
          danger={asking.kind === 'dismiss-all'}
          reason="Reason (kept in the audit log)"
          reasonOptional={asking.kind === 'resend-all'}
          onConfirm={async (reason) => {
            setBulk({ kind: asking.kind === 'resend-all' ? 'resend' : 'dismiss', reason });
          }}
          onClose={() => setAsking(null)}
        >
          <p>
            Every message quarantined {iface ? `in ${iface}` : 'in any interface'} now, on every page, not only this one:{' '}
            {asking.kind === 'resend-all'
              ? 'their quarantined deliveries go back to pending, 500 messages a call, attempts kept.'
              : 'their quarantined deliveries are filtered and will not be sent, one message a call.'}{' '}
            You can cancel while it runs.
          </p>
        </Confirm>
      )}
      {bulk && (
        <BulkRun
          title={`${bulk.kind === 'resend' ? 'Resending' : 'Dismissing'} every quarantined message${iface ? ` of ${iface}` : ''}`}
          verb={bulk.kind === 'resend' ? 'resent' : 'dismissed'}
          nothing="no longer quarantined"
          run={async (report, cancelled) => {
            const found = await collectIds(everyQuarantined(iface), report, cancelled);
            if (found.error) return found.error;
            // Oldest first, as they arrived.
            const ids = [...found.ids].sort((a, b) => a - b);
            return bulk.kind === 'resend'
              ? resendAll(ids, bulk.reason ? { reason: bulk.reason } : {}, report, cancelled)
              : dismissAll(ids, bulk.reason, report, cancelled);
          }}
          onClose={(o) => {
            if (o) setNotice(outcomeText(o, bulk.kind === 'resend' ? 'resent' : 'dismissed', 'no longer quarantined'));
            setBulk(null);
            setSelected(new Set());
            void list.reload();
          }}
        />
      )}
      {asking?.kind === 'resend' && (
        <Confirm
          title={asking.ids.length === 1 ? `Resend message ${asking.ids[0]}?` : `Resend ${asking.ids.length} messages?`}
          confirmLabel="Resend"
          onConfirm={async () => {
            const r =
              asking.ids.length === 1
                ? await call('post', '/api/v1/messages/{id}/resend', { path: { id: asking.ids[0]! }, body: {} })
                : await call('post', '/api/v1/messages/resend', { body: { ids: asking.ids } });
            if (r.ok) {
              setNotice(`${r.data.deliveries ?? 0} deliveries of ${r.data.messages ?? 0} messages moved back to pending.`);
              setSelected(new Set());
              void list.reload();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>Their quarantined deliveries go back to pending, attempts kept.</p>
        </Confirm>
      )}
      {asking?.kind === 'dismiss' && (
        <Confirm
          title={asking.ids.length === 1 ? `Dismiss message ${asking.ids[0]}?` : `Dismiss ${asking.ids.length} messages?`}
          confirmLabel="Dismiss"
          danger
          reason="Reason (kept in the audit log)"
          onConfirm={async (reason) => {
            // One call per message: each is its own change, with its own audit row.
            let done = 0;
            for (const id of asking.ids) {
              const r = await call('post', '/api/v1/messages/{id}/dismiss', { path: { id }, body: { reason } });
              if (!r.ok) {
                if (done) void list.reload();
                return { ...r, message: `Message ${id}: ${r.message} (${done} dismissed before it)` };
              }
              done++;
            }
            setNotice(`${done} message${done === 1 ? '' : 's'} dismissed.`);
            setSelected(new Set());
            void list.reload();
          }}
          onClose={() => setAsking(null)}
        >
          <p>Their quarantined deliveries are filtered and will not be sent.</p>
        </Confirm>
      )}
    </Page>
  );
}
