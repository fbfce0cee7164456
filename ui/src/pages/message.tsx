import { useEffect, useState } from 'preact/hooks';
import { call, type Answer } from '../api/client';
import { Hl7, isHl7 } from '../components/hl7';
import { Badge, Confirm, ErrorNote, Notice, Page, When, useApi } from '../components/ui';
import { navigate, useLocation } from '../router';
import { atLeast, may, me } from '../session';
import { useStore } from '../store';

type Payload = Answer<'/api/v1/messages/{id}/payload'>;
type Tried = Answer<'/api/v1/interfaces/{name}/try', 'post'>;

function Text({ encoding, text, label }: { encoding?: string; text: string; label: string }) {
  if (encoding === 'base64')
    return (
      <>
        <p class="muted">Binary (shown as base64).</p>
        <pre class="payload">{text}</pre>
      </>
    );
  if (isHl7(text)) return <Hl7 text={text} label={label} />;
  return (
    <pre class="payload" tabIndex={0} aria-label={label}>
      {text}
    </pre>
  );
}

export default function Message({ id }: { id: string }) {
  const who = useStore(me);
  const { query } = useLocation();
  const message = useApi(() => call('get', '/api/v1/messages/{id}', { path: { id } }), [id]);
  const canRead = may(who, 'payloads');
  const payload = useApi<Payload | null>(
    () =>
      canRead
        ? call('get', '/api/v1/messages/{id}/payload', { path: { id } })
        : Promise.resolve({ ok: true as const, data: null }),
    [id, canRead],
  );
  const [asking, setAsking] = useState<null | 'resend' | 'dismiss'>(null);
  const [editing, setEditing] = useState(query.get('edit') === '1');
  const [notice, setNotice] = useState<string | null>(query.get('notice'));
  useEffect(() => setNotice(query.get('notice')), [id]);

  const m = message.data;
  // While something is on its way, look again: the page shows the outcome.
  const moving = m?.status === 'pending' || m?.deliveries?.some((d) => d.status === 'pending');
  useEffect(() => {
    if (!moving) return;
    const t = window.setInterval(() => {
      void message.reload();
      if (canRead) void payload.reload();
    }, 2000);
    return () => window.clearInterval(t);
  }, [moving, message.reload, payload.reload, canRead]);

  const operator = atLeast(who, 'operator');
  const quarantined = m?.deliveries?.some((d) => d.status === 'quarantined') ?? false;
  const [chosen, setChosen] = useState<string[]>([]);
  const openResend = () => {
    // The quarantined ones ticked: what "resend" meant before a choice.
    setChosen((m?.deliveries ?? []).filter((d) => d.status === 'quarantined').map((d) => d.destination ?? ''));
    setAsking('resend');
  };
  const p = payload.data;
  return (
    <Page
      title={`Message ${id}`}
      actions={
        operator && (m?.deliveries?.length ?? 0) > 0 ? (
          <>
            <button class={quarantined ? 'button primary' : 'button'} onClick={openResend}>
              Resend to…
            </button>
            {quarantined && canRead && (
              <button class="button" onClick={() => setEditing(true)} disabled={editing || !p}>
                Edit…
              </button>
            )}
            {quarantined && (
              <button class="button danger" onClick={() => setAsking('dismiss')}>
                Dismiss…
              </button>
            )}
          </>
        ) : null
      }
    >
      <ErrorNote message={message.error} />
      <Notice message={notice} />
      {m && (
        <>
          <dl class="facts">
            <div>
              <dt>Interface</dt>
              <dd>
                <a href={`/interfaces/${encodeURIComponent(m.interface ?? '')}/messages`}>{m.interface}</a>
              </dd>
            </div>
            <div>
              <dt>Status</dt>
              <dd data-status={m.status}>{m.status && <Badge value={m.status} />}</dd>
            </div>
            <div>
              <dt>Received</dt>
              <dd>
                <When at={m.receivedAt} />
              </dd>
            </div>
            <div>
              <dt>Type</dt>
              <dd>{m.type ?? '–'}</dd>
            </div>
            <div>
              <dt>Control id</dt>
              <dd>{m.controlId ?? '–'}</dd>
            </div>
            <div>
              <dt>Key</dt>
              <dd>{m.key ?? '–'}</dd>
            </div>
            <div>
              <dt>Size</dt>
              <dd>
                {m.bytes} bytes{m.charset ? `, ${m.charset}` : ''}
              </dd>
            </div>
            <div>
              <dt>Lane / tier</dt>
              <dd>
                {m.lane} / {m.tier}
              </dd>
            </div>
            {m.originId ? (
              <div>
                <dt>Copy of</dt>
                <dd>
                  <a href={`/messages/${m.originId}`}>message {m.originId}</a>
                </dd>
              </div>
            ) : null}
          </dl>
          {m.status === 'duplicate' ? (
            <p class="note" data-note="duplicate">
              A duplicate: its sender was answered AA and it was not queued.
              {m.duplicateOf ? (
                <>
                  {' '}
                  The original is <a href={`/messages/${m.duplicateOf}`}>message {m.duplicateOf}</a>.
                </>
              ) : null}
            </p>
          ) : (
            m.lastError && (
              <p class="note error">
                <strong>Last error:</strong> {m.lastError}
              </p>
            )
          )}
          {m.editedFrom ? (
            <p class="note" data-note="edited-from">
              An edited copy of <a href={`/messages/${m.editedFrom}`}>message {m.editedFrom}</a>.
            </p>
          ) : null}
          {m.editedTo?.length ? (
            <p class="note" data-note="edited-to">
              Edited as{' '}
              {m.editedTo.map((c, i) => (
                <span key={c}>
                  {i ? ', ' : ''}
                  <a href={`/messages/${c}`}>message {c}</a>
                </span>
              ))}
              .
            </p>
          ) : null}

          <section aria-labelledby="deliveries-h">
            <h2 id="deliveries-h">Deliveries</h2>
            <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Destination</th>
                    <th scope="col">Status</th>
                    <th scope="col" class="num">Attempts</th>
                    <th scope="col">Last error</th>
                    <th scope="col">Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {(m.deliveries ?? []).map((d) => (
                    <tr key={d.destination} data-dest={d.destination}>
                      <th scope="row">{d.destination}</th>
                      <td data-status={d.status}>
                        <Badge value={d.status ?? 'pending'} />
                      </td>
                      <td class="num">{d.attempts}</td>
                      <td class="error-text">{d.lastError ?? ''}</td>
                      <td>
                        <When at={d.updatedAt} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </section>
        </>
      )}

      {editing && p && m && (
        <Editor
          id={id}
          iface={m.interface ?? ''}
          original={p.encoding === 'base64' ? '' : (p.payload ?? '')}
          onCancel={() => setEditing(false)}
          onSaved={(copy) => {
            setEditing(false);
            navigate(`/messages/${copy}?notice=${encodeURIComponent(`Stored as an edited copy of message ${id}.`)}`);
          }}
        />
      )}

      {canRead ? (
        <>
          <ErrorNote message={payload.error} />
          {p && (
            <section aria-labelledby="payload-h">
              <h2 id="payload-h">Payload</h2>
              <Text encoding={p.encoding} text={p.payload ?? ''} label="Payload" />
              {(p.outputs ?? []).map((o) => (
                <section key={o.destination} aria-labelledby={`out-${o.destination}`}>
                  <h3 id={`out-${o.destination}`}>Output to {o.destination}</h3>
                  <Text encoding={o.encoding} text={o.output ?? ''} label={`Output to ${o.destination}`} />
                </section>
              ))}
            </section>
          )}
        </>
      ) : (
        <p class="muted">Reading payloads needs the payloads permission.</p>
      )}

      {asking === 'resend' && m && (
        <Confirm
          title={`Resend message ${id} to…`}
          confirmLabel="Resend"
          reason="Reason (kept in the audit log)"
          reasonOptional
          onConfirm={async (reason) => {
            if (chosen.length === 0) return { ok: false as const, status: 400, error: 'invalid', message: 'Choose at least one destination.' };
            const r = await call('post', '/api/v1/messages/{id}/resend', {
              path: { id },
              body: reason ? { destinations: chosen, reason } : { destinations: chosen },
            });
            if (r.ok) {
              setNotice(`${r.data.deliveries ?? 0} ${r.data.deliveries === 1 ? 'delivery' : 'deliveries'} to ${chosen.join(', ')} moved back to pending.`);
              void message.reload();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <fieldset class="choices">
            <legend>Destinations</legend>
            {(m.deliveries ?? []).map((d) => {
              const dest = d.destination ?? '';
              return (
                <label key={dest} class="inline">
                  <input
                    type="checkbox"
                    name="destination"
                    value={dest}
                    checked={chosen.includes(dest)}
                    disabled={d.status === 'pending'}
                    onChange={(e) =>
                      setChosen(e.currentTarget.checked ? [...chosen, dest] : chosen.filter((x) => x !== dest))
                    }
                  />{' '}
                  {dest} <span class="muted">({d.status}{d.status === 'pending' ? ', on its way' : ''})</span>
                </label>
              );
            })}
          </fieldset>
          <p>The chosen deliveries go back to pending, whatever they ended as (sent and filtered too), their attempts kept. The others stay as they are.</p>
        </Confirm>
      )}
      {asking === 'dismiss' && (
        <Confirm
          title={`Dismiss message ${id}?`}
          confirmLabel="Dismiss"
          danger
          reason="Reason (kept in the audit log)"
          onConfirm={async (reason) => {
            const r = await call('post', '/api/v1/messages/{id}/dismiss', { path: { id }, body: { reason } });
            if (r.ok) {
              setNotice(`Dismissed: ${(r.data.destinations ?? []).join(', ')}.`);
              void message.reload();
            }
            return r;
          }}
          onClose={() => setAsking(null)}
        >
          <p>Its quarantined deliveries are filtered and will not be sent.</p>
        </Confirm>
      )}
    </Page>
  );
}

/** A dry run's answer: intake's refusal, or each destination's outcome. */
function TryResult({ tried }: { tried: Tried }) {
  return (
    <section aria-labelledby="try-h" class="try-result" data-tried={tried.ran ? 'ran' : 'refused'}>
      <h3 id="try-h">Dry run: nothing was stored or sent</h3>
      {!tried.ran ? (
        <p class="note error" role="alert">
          {tried.check.message ?? 'Intake would refuse this payload.'}
        </p>
      ) : (
        tried.destinations.map((d) => (
          <section key={d.destination} aria-labelledby={`try-${d.destination}`} data-try-destination={d.destination} data-outcome={d.outcome}>
            <h4 id={`try-${d.destination}`}>
              To {d.destination}
              {d.route ? ' (a route)' : ''} <Badge value={d.outcome === 'error' ? 'failed' : d.outcome} label={d.outcome} />{' '}
              <span class="muted small">{d.millis} ms</span>
            </h4>
            {d.outcome === 'sent' && d.output !== null && (
              <Text encoding={d.encoding} text={d.output} label={`Output to ${d.destination}`} />
            )}
            {d.outcome === 'filtered' && <p class="muted">Filtered{d.reason ? `: ${d.reason}` : ''}.</p>}
            {(d.outcome === 'quarantined' || d.outcome === 'error') && (
              <p class="note error">
                {d.outcome === 'quarantined' ? 'Would be quarantined' : 'Would be retried'}
                {d.runaway ? ` (ran past its ${d.runaway})` : ''}: {d.error ?? 'no reason given'}
              </p>
            )}
          </section>
        ))
      )}
    </section>
  );
}

function Editor({
  id,
  iface,
  original,
  onCancel,
  onSaved,
}: {
  id: string;
  iface: string;
  original: string;
  onCancel: () => void;
  onSaved: (copy: number) => void;
}) {
  // HL7 separates segments with CR; a textarea shows and writes LF.
  const cr = original.includes('\r');
  const [text, setText] = useState(original.replace(/\r\n?/g, '\n'));
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [invalid, setInvalid] = useState(false);
  const [tried, setTried] = useState<Tried | null>(null);
  const [trying, setTrying] = useState(false);
  const payloadOf = () => (cr ? text.replace(/\n/g, '\r') : text);
  const tryIt = async () => {
    setTrying(true);
    setError(null);
    setTried(null);
    const r = await call('post', '/api/v1/interfaces/{name}/try', { path: { name: iface }, body: { payload: payloadOf() } });
    setTrying(false);
    if (r.ok) {
      setTried(r.data);
      setInvalid(!r.data.ran);
    } else setError(r.message);
  };
  return (
    <section aria-labelledby="edit-h" class="panel editor">
      <h2 id="edit-h">Edit a copy of message {id}</h2>
      <p class="muted">
        The original stays as it is; the copy is stored and delivered, and the original's quarantined deliveries are
        marked as replaced by it. Try runs each destination's code on the copy in the engine's workers first: nothing is
        stored or sent.
      </p>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setBusy(true);
          setError(null);
          const payload = payloadOf();
          const r = await call('post', '/api/v1/messages/{id}/edit', {
            path: { id },
            body: reason.trim() ? { payload, reason: reason.trim() } : { payload },
          });
          setBusy(false);
          if (r.ok && r.data.messageId !== undefined) onSaved(r.data.messageId);
          else if (!r.ok) {
            setError(r.message);
            setInvalid(r.error === 'invalid_payload');
          }
        }}
      >
        <label class="field">
          <span>Payload</span>
          <textarea
            name="payload"
            class="code"
            rows={Math.min(24, Math.max(6, text.split('\n').length + 1))}
            spellcheck={false}
            value={text}
            aria-invalid={invalid}
            aria-describedby={error ? 'edit-error' : undefined}
            onInput={(e) => {
              setText(e.currentTarget.value);
              setTried(null);
              setInvalid(false);
            }}
          />
        </label>
        <label class="field">
          <span>Reason (optional)</span>
          <input name="reason" maxLength={1000} value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
        </label>
        <div id="edit-error">
          <ErrorNote message={error} />
        </div>
        {tried && <TryResult tried={tried} />}
        <div class="dialog-actions">
          <button type="button" class="button" onClick={onCancel} disabled={busy}>
            Cancel
          </button>
          <button type="button" class="button" onClick={() => void tryIt()} disabled={busy || trying || !text.trim() || !iface}>
            {trying ? 'Trying…' : 'Try'}
          </button>
          <button type="submit" class="button primary" disabled={busy || !text.trim()}>
            {busy ? 'Saving…' : 'Save and deliver the copy'}
          </button>
        </div>
      </form>
    </section>
  );
}
