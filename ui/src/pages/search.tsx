import { call, type Result } from '../api/client';
import { ErrorNote, Page, useApi } from '../components/ui';
import { useLocation } from '../router';
import { MessageTable, type Row } from './message_table';

// What the box above every page finds when it isn't a message number:
// messages of every interface with that control id (MSH-10) or that key
// (the ordering key, e.g. the MRN), newest first. Both lookups are
// index-backed (migration 0015); the box itself is in app.tsx.

const LIMIT = 100;

type Found = { items: Row[]; more: boolean };

async function find(text: string): Promise<Result<Found>> {
  const [byControl, byKey] = await Promise.all([
    call('get', '/api/v1/messages', { query: { control_id: text, limit: String(LIMIT) } }),
    call('get', '/api/v1/messages', { query: { key: text, limit: String(LIMIT) } }),
  ]);
  if (!byControl.ok) return byControl;
  if (!byKey.ok) return byKey;
  const seen = new Map<number, Row>();
  for (const m of [...byControl.data.items, ...byKey.data.items]) seen.set(m.id, m);
  const items = [...seen.values()].sort((a, b) => b.id - a.id);
  return { ok: true, data: { items, more: byControl.data.next !== null || byKey.data.next !== null } };
}

export default function Search() {
  const { query } = useLocation();
  const text = (query.get('q') ?? '').trim();
  const found = useApi(() => (text ? find(text) : Promise.resolve({ ok: true as const, data: { items: [], more: false } })), [text]);
  const items = found.data?.items ?? [];
  return (
    <Page title={text ? `Messages matching ${text}` : 'Search'}>
      <p class="muted">
        Control id or key (such as an MRN), exactly, in every interface. A number in the box opens that message.
      </p>
      <ErrorNote message={found.error} />
      {text && !found.loading && (
        <p class="muted" data-found={items.length}>
          {items.length === 0 ? 'No message has that control id or key.' : `${items.length}${found.data?.more ? '+' : ''} found${found.data?.more ? `; the newest ${LIMIT} of each kind are shown` : ''}.`}
        </p>
      )}
      {items.length > 0 && <MessageTable items={items} busy={found.loading} caption={`Messages matching ${text}`} withInterface />}
    </Page>
  );
}
