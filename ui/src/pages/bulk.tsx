import { useEffect, useRef, useState } from 'preact/hooks';
import { call, type Result } from '../api/client';

// Acting on every message a filter matches, not only the page shown: the
// ids are read page after page (500 a call), then acted on in batches
// (the API's resend takes 500 ids a call, a dismissal one message), with
// progress, a Cancel that stops after the calls in flight, and a summary
// naming what failed. Each call is its own change with its own audit row.

/** The most messages one bulk action takes (an export's bound too). */
export const BULK_MAX = 100_000;
/** The API's resend takes at most this many ids a call. */
export const RESEND_BATCH = 500;

export interface Progress {
  phase: 'finding' | 'acting';
  done: number;
  total: number;
}

export interface Outcome {
  total: number;
  /** Messages whose call finished (changed, nothing to change, or failed). */
  done: number;
  changed: number;
  deliveries: number;
  /** Messages the action did not apply to (nothing quarantined, say). */
  unchanged: number;
  failures: { id: number; message: string }[];
  /** Why the run stopped before the end (the engine refused or was gone). */
  stopped: string | null;
  cancelled: boolean;
}

type Report = (p: Progress) => void;
type Cancelled = () => boolean;

function outcome(total: number): Outcome {
  return { total, done: 0, changed: 0, deliveries: 0, unchanged: 0, failures: [], stopped: null, cancelled: false };
}

/** Every id a paged list gives: `page(cursor)` answers a page's ids and the
 * next cursor (null: the last page). More than BULK_MAX: refused. */
export async function collectIds(
  page: (cursor: number | null) => Promise<Result<{ ids: number[]; next: number | null }>>,
  report: Report,
  cancelled: Cancelled,
): Promise<{ ids: number[]; error: string | null }> {
  const ids: number[] = [];
  const seen = new Set<number>();
  let cursor: number | null = null;
  for (;;) {
    if (cancelled()) return { ids, error: null };
    const r = await page(cursor);
    if (!r.ok) return { ids, error: r.message };
    for (const id of r.data.ids)
      if (!seen.has(id)) {
        seen.add(id);
        ids.push(id);
      }
    report({ phase: 'finding', done: ids.length, total: 0 });
    if (ids.length > BULK_MAX)
      return { ids, error: `More than ${BULK_MAX.toLocaleString('en')} messages match: narrow the filter (a time window, a status) and act on each part.` };
    if (r.data.next === null || r.data.ids.length === 0) return { ids, error: null };
    cursor = r.data.next;
  }
}

class Stop extends Error {}

/** Resends `ids` in batches of RESEND_BATCH. A batch the API refuses for one
 * of its messages (gone, say) is halved until that message is named alone;
 * one with nothing to resend counts as such; anything else (signed out, the
 * engine unreachable or failing) stops the run. */
export async function resendAll(
  ids: number[],
  body: { destinations?: string[]; reason?: string },
  report: Report,
  cancelled: Cancelled,
): Promise<Outcome> {
  const o = outcome(ids.length);
  const batch = async (part: number[]): Promise<void> => {
    const r = await call('post', '/api/v1/messages/resend', { body: { ids: part, ...body } });
    if (r.ok) {
      o.changed += r.data.messages ?? 0;
      o.deliveries += r.data.deliveries ?? 0;
      o.unchanged += part.length - (r.data.messages ?? 0);
      o.done += part.length;
    } else if (r.error === 'nothing_to_change') {
      o.unchanged += part.length;
      o.done += part.length;
    } else if (r.status === 400 || r.status === 404 || r.status === 409) {
      if (part.length === 1) {
        o.failures.push({ id: part[0]!, message: r.message });
        o.done += 1;
      } else {
        const half = Math.ceil(part.length / 2);
        await batch(part.slice(0, half));
        if (!cancelled()) await batch(part.slice(half));
        return;
      }
    } else {
      throw new Stop(r.message);
    }
    report({ phase: 'acting', done: o.done, total: o.total });
  };
  try {
    for (let i = 0; i < ids.length; i += RESEND_BATCH) {
      if (cancelled()) {
        o.cancelled = true;
        break;
      }
      await batch(ids.slice(i, i + RESEND_BATCH));
    }
  } catch (e) {
    if (!(e instanceof Stop)) throw e;
    o.stopped = e.message;
  }
  return o;
}

/** Dismisses each message (one call each, four at a time). */
export async function dismissAll(ids: number[], reason: string, report: Report, cancelled: Cancelled): Promise<Outcome> {
  const o = outcome(ids.length);
  let next = 0;
  const worker = async () => {
    while (next < ids.length && !o.stopped) {
      if (cancelled()) {
        o.cancelled = true;
        return;
      }
      const id = ids[next++]!;
      const r = await call('post', '/api/v1/messages/{id}/dismiss', { path: { id }, body: { reason } });
      if (r.ok) o.changed++;
      else if (r.error === 'nothing_to_change') o.unchanged++;
      else if (r.status === 404) o.failures.push({ id, message: r.message });
      else {
        o.stopped ??= r.message;
        return;
      }
      o.done++;
      report({ phase: 'acting', done: o.done, total: o.total });
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return o;
}

const n = (v: number) => v.toLocaleString('en');

/** The run in a line, for the page's notice once the dialog is closed:
 * "Cancelled after 500 of 620: 500 messages resent (500 deliveries), …". */
export function outcomeText(o: Outcome, verb: string, nothing: string): string {
  const how = o.stopped ? `Stopped after ${n(o.done)} of ${n(o.total)}: ` : o.cancelled ? `Cancelled after ${n(o.done)} of ${n(o.total)}: ` : '';
  const deliveries = o.deliveries ? ` (${n(o.deliveries)} ${o.deliveries === 1 ? 'delivery' : 'deliveries'})` : '';
  return `${how}${n(o.changed)} ${o.changed === 1 ? 'message' : 'messages'} ${verb}${deliveries}${o.unchanged ? `, ${n(o.unchanged)} ${nothing}` : ''}${o.failures.length ? `, ${n(o.failures.length)} failed` : ''}.`;
}

/** "1,500 of 4,312 resent". */
export function progressText(p: Progress, verb: string): string {
  if (p.phase === 'finding') return `Finding the matching messages… ${n(p.done)} found`;
  return `${n(p.done)} of ${n(p.total)} ${verb}`;
}

function Summary({ o, verb, nothing }: { o: Outcome; verb: string; nothing: string }) {
  const left = o.total - o.done;
  return (
    <div data-bulk-summary={o.stopped ? 'stopped' : o.cancelled ? 'cancelled' : 'done'}>
      {o.stopped && (
        <p class="note error" role="alert">
          Stopped after {n(o.done)} of {n(o.total)}: {o.stopped}
        </p>
      )}
      {o.cancelled && (
        <p class="note warn">
          Cancelled: {n(left)} of {n(o.total)} {left === 1 ? 'message was' : 'messages were'} left as they were.
        </p>
      )}
      <p data-changed={o.changed}>
        {n(o.changed)} {o.changed === 1 ? 'message' : 'messages'} {verb}
        {o.deliveries ? ` (${n(o.deliveries)} ${o.deliveries === 1 ? 'delivery' : 'deliveries'})` : ''}
        {o.unchanged ? `; ${n(o.unchanged)} ${nothing}` : ''}
        {o.failures.length ? `; ${n(o.failures.length)} failed` : ''}.
      </p>
      {o.failures.length > 0 && (
        <ul class="failures" aria-label="Failed">
          {o.failures.slice(0, 50).map((f) => (
            <li key={f.id}>
              <a href={`/messages/${f.id}`}>Message {f.id}</a>: {f.message}
            </li>
          ))}
          {o.failures.length > 50 && <li>and {n(o.failures.length - 50)} more</li>}
        </ul>
      )}
    </div>
  );
}

/** A modal dialog running `run` from when it opens: its progress, a Cancel
 * while it runs, the summary when it ends, and Close. */
export function BulkRun({
  title,
  verb,
  nothing,
  run,
  onClose,
}: {
  title: string;
  /** "resent", "dismissed" */
  verb: string;
  /** What a message the action did not apply to is: "had nothing to resend". */
  nothing: string;
  run: (report: Report, cancelled: Cancelled) => Promise<Outcome | string>;
  onClose: (o: Outcome | null) => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const cancel = useRef(false);
  const [progress, setProgress] = useState<Progress>({ phase: 'finding', done: 0, total: 0 });
  const [result, setResult] = useState<Outcome | string | null>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    let live = true;
    run(
      (p) => live && setProgress(p),
      () => cancel.current,
    ).then(
      (r) => live && setResult(r),
      (e: unknown) => live && setResult(String(e)),
    );
    return () => {
      live = false;
      cancel.current = true;
      d?.close();
    };
  }, []);
  const finished = result !== null;
  const close = () => onClose(typeof result === 'object' ? result : null);
  return (
    <dialog
      ref={ref}
      class="dialog"
      aria-labelledby="bulk-title"
      onCancel={(e) => {
        // Escape cancels the run first; once it ended, it closes.
        if (!finished) {
          e.preventDefault();
          cancel.current = true;
        } else close();
      }}
    >
      <h2 id="bulk-title">{title}</h2>
      {!finished && (
        <>
          <progress
            class="bulk-progress"
            max={progress.phase === 'acting' ? progress.total || 1 : undefined}
            value={progress.phase === 'acting' ? progress.done : undefined}
            aria-label="Progress"
          />
          <p role="status" data-bulk-progress={progress.phase === 'acting' ? `${progress.done}/${progress.total}` : 'finding'}>
            {progressText(progress, verb)}
            {cancel.current ? ' — cancelling after the calls in flight…' : ''}
          </p>
        </>
      )}
      {typeof result === 'string' && (
        <p class="note error" role="alert">
          {result}
        </p>
      )}
      {result && typeof result === 'object' && <Summary o={result} verb={verb} nothing={nothing} />}
      <div class="dialog-actions">
        {finished ? (
          <button type="button" class="button primary" onClick={close} autoFocus>
            Close
          </button>
        ) : (
          <button
            type="button"
            class="button"
            onClick={() => {
              cancel.current = true;
              setProgress({ ...progress });
            }}
          >
            Cancel
          </button>
        )}
      </div>
    </dialog>
  );
}
