import type { JSX } from 'preact';
import { type Answer } from '../api/client';
import { Badge, When } from '../components/ui';

// A page of messages as the list and the search show it: each row says
// why its message waits (each delivery's last error, a paused destination)
// and where it came from (an edited copy, a duplicate of which original),
// so nobody opens messages one by one to find out.

export type Row = Answer<'/api/v1/messages'>['items'][number];
type Total = Answer<'/api/v1/messages'>['total'];

export function TotalLine({ total, shown }: { total: Total | undefined; shown: number }) {
  if (!total) return null;
  return (
    <p class="muted" data-total={total.count}>
      {total.exact ? `${total.count.toLocaleString('en')} ${total.count === 1 ? 'message' : 'messages'}` : `More than ${total.count.toLocaleString('en')} messages`}
      {total.count > shown ? `, ${shown} on this page` : ''}
    </p>
  );
}

function Why({ m }: { m: Row }) {
  const lines: JSX.Element[] = [];
  if (m.status === 'duplicate')
    lines.push(
      <span key="dup" class="muted">
        duplicate{m.duplicateOf ? (
          <>
            {' '}
            of <a href={`/messages/${m.duplicateOf}`}>{m.duplicateOf}</a>
          </>
        ) : null}{' '}
        (answered AA, not queued)
      </span>,
    );
  else if (m.lastError)
    lines.push(
      <span key="msg" class="error-text">
        {m.lastError}
      </span>,
    );
  for (const d of m.deliveries) {
    if (d.paused)
      lines.push(
        <span key={`p${d.destination}`} class="muted">
          {d.destination}: waits for its destination to be resumed
        </span>,
      );
    else if (d.lastError && (d.status === 'pending' || d.status === 'quarantined'))
      lines.push(
        <span key={`e${d.destination}`} class="error-text" data-delivery-error={d.destination}>
          {d.destination}: {d.lastError}
        </span>,
      );
  }
  if (!lines.length) return null;
  return <div class="why">{lines}</div>;
}

export function MessageTable({ items, busy, caption, withInterface }: { items: Row[]; busy: boolean; caption: string; withInterface?: boolean }) {
  return (
    <div class="table-wrap">
      <table aria-busy={busy}>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Id</th>
            {withInterface && <th scope="col">Interface</th>}
            <th scope="col">Received</th>
            <th scope="col">Status</th>
            <th scope="col">Type</th>
            <th scope="col">Control id</th>
            <th scope="col">Key</th>
            <th scope="col">Deliveries</th>
            <th scope="col">Why</th>
          </tr>
        </thead>
        <tbody>
          {items.map((m) => (
            <tr key={m.id} data-message={m.id}>
              <th scope="row" class="nowrap">
                <a href={`/messages/${m.id}`}>{m.id}</a>
                {m.editedFrom ? (
                  <div class="muted small">
                    edited copy of <a href={`/messages/${m.editedFrom}`}>{m.editedFrom}</a>
                  </div>
                ) : m.originId ? (
                  <div class="muted small">copy of {m.originId}</div>
                ) : null}
                {m.editedTo.length ? (
                  <div class="muted small">
                    edited as{' '}
                    {m.editedTo.map((c, i) => (
                      <span key={c}>
                        {i ? ', ' : ''}
                        <a href={`/messages/${c}`}>{c}</a>
                      </span>
                    ))}
                  </div>
                ) : null}
              </th>
              {withInterface && (
                <td>
                  <a href={`/interfaces/${encodeURIComponent(m.interface)}`}>{m.interface}</a>
                </td>
              )}
              <td>
                <When at={m.receivedAt} />
              </td>
              <td>
                <Badge value={m.status} />
              </td>
              <td class="nowrap">{m.type ?? <span class="muted">–</span>}</td>
              <td class="nowrap">{m.controlId ?? <span class="muted">–</span>}</td>
              <td class="nowrap">{m.key ?? <span class="muted">–</span>}</td>
              <td>
                {m.deliveries.map((d) => (
                  <span key={d.destination} class="delivery">
                    {d.destination} <Badge value={d.paused ? 'paused' : d.status} label={d.paused ? 'pending, paused' : d.status} />
                    {d.attempts ? <span class="muted"> ×{d.attempts}</span> : null}
                  </span>
                ))}
              </td>
              <td>
                <Why m={m} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
