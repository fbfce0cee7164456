import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import type { Result } from '../api/client';
import { onReconnect } from '../connection';

/** An answer being fetched: data, the error's message, and a way to ask again. */
export function useApi<T>(load: () => Promise<Result<T>>, deps: unknown[]) {
  const [state, setState] = useState<{ data: T | null; error: string | null; loading: boolean }>({
    data: null,
    error: null,
    loading: true,
  });
  const seq = useRef(0);
  const reload = useCallback(async () => {
    const mine = ++seq.current;
    setState((s) => ({ ...s, loading: true }));
    const r = await load();
    // An older answer arriving late must not replace a newer one.
    if (mine !== seq.current) return;
    if (r.ok) setState({ data: r.data, error: null, loading: false });
    // Unreachable: the banner above every page says so, with since when.
    else if (r.status === 0) setState((s) => ({ ...s, loading: false }));
    else setState((s) => ({ data: s.data, error: r.message, loading: false }));
    // The caller names what the request depends on, as for useEffect.
  }, deps);
  useEffect(() => {
    void reload();
  }, [reload]);
  useEffect(() => onReconnect(() => void reload()), [reload]);
  return { ...state, reload };
}

export function Page({ title, actions, children }: { title: string; actions?: ComponentChildren; children?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · Ductus`;
  }, [title]);
  return (
    <>
      <header class="page-head">
        {/* Focused after each navigation, so a screen reader hears where it is. */}
        <h1 tabIndex={-1} id="page-title">
          {title}
        </h1>
        {actions && <div class="page-actions">{actions}</div>}
      </header>
      {children}
    </>
  );
}

export function ErrorNote({ message }: { message: string | null | undefined }) {
  if (!message) return null;
  return (
    <p class="note error" role="alert">
      {message}
    </p>
  );
}

export function Notice({ message }: { message: string | null | undefined }) {
  if (!message) return null;
  return (
    <p class="note ok" role="status">
      {message}
    </p>
  );
}

const tone: Record<string, string> = {
  sent: 'ok',
  running: 'ok',
  open: 'ok',
  serving: 'ok',
  ok: 'ok',
  pending: 'info',
  starting: 'info',
  filtered: 'neutral',
  duplicate: 'neutral',
  quarantined: 'bad',
  stopped: 'bad',
  down: 'bad',
  denied: 'bad',
  failed: 'bad',
  closed: 'warn',
  paused: 'warn',
  draining: 'warn',
  stopping: 'warn',
  // The monitor's states (and an alert's phase and severity).
  stalled: 'bad',
  failing: 'bad',
  error: 'bad',
  behind: 'warn',
  intake_stopped: 'warn',
  late: 'warn',
  quiet: 'warn',
  expiring: 'warn',
  firing: 'bad',
  recovering: 'info',
  critical: 'bad',
  warning: 'warn',
  info: 'info',
};

export function Badge({ value, label }: { value: string; label?: string }) {
  return <span class={`badge ${tone[value] ?? 'neutral'}`}>{label ?? value}</span>;
}

/** A health state as a badge (a word, coloured) and the reason beside it;
 * "not judged yet" before the engine judges. */
export function HealthBadge({ health }: { health: { state: string; reason: string } | null | undefined }) {
  if (!health) return <span class="muted">not judged yet</span>;
  return (
    <span class="health" data-health={health.state}>
      <Badge value={health.state} />
      {health.reason && <span class="health-reason"> {health.reason}</span>}
    </span>
  );
}

export function When({ at }: { at: string | null | undefined }) {
  if (!at) return <span class="muted">–</span>;
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return <span>{at}</span>;
  return (
    <time dateTime={at} title={d.toISOString()}>
      {formatTime(d)}
    </time>
  );
}

export function formatTime(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function Count({ value }: { value: number | null | undefined }) {
  if (value === null || value === undefined) return <span class="muted" title="could not be counted">?</span>;
  return <>{value.toLocaleString('en')}</>;
}

interface ConfirmProps {
  title: string;
  children?: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  /** Asks for a reason; required unless reasonOptional. */
  reason?: string;
  reasonOptional?: boolean;
  onConfirm: (reason: string) => Promise<Result<unknown> | void>;
  onClose: () => void;
}

/** A modal <dialog>: Escape or Cancel closes it, focus stays inside. */
export function Confirm({ title, children, confirmLabel, danger, reason, reasonOptional, onConfirm, onClose }: ConfirmProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  const submit = async (e: JSX.TargetedEvent<HTMLFormElement>) => {
    e.preventDefault();
    if (reason && !reasonOptional && !text.trim()) {
      setError('A reason is required.');
      return;
    }
    setBusy(true);
    setError(null);
    const r = await onConfirm(text.trim());
    setBusy(false);
    if (r && !r.ok) setError(r.message);
    else onClose();
  };
  return (
    <dialog ref={ref} class="dialog" aria-labelledby="dialog-title" onClose={onClose} onCancel={onClose}>
      <form onSubmit={submit}>
        <h2 id="dialog-title">{title}</h2>
        {children}
        {reason && (
          <label class="field">
            <span>
              {reason}
              {!reasonOptional && <span aria-hidden="true"> *</span>}
            </span>
            <textarea
              name="reason"
              rows={3}
              required={!reasonOptional}
              maxLength={1000}
              value={text}
              onInput={(e) => setText(e.currentTarget.value)}
            />
          </label>
        )}
        <ErrorNote message={error} />
        <div class="dialog-actions">
          <button type="button" class="button" onClick={onClose} disabled={busy}>
            Cancel
          </button>
          <button type="submit" class={`button ${danger ? 'danger' : 'primary'}`} disabled={busy}>
            {busy ? 'Working…' : confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** Links between pages of a list: back to the first, and the pages on
 * either side (newest first: Newer, Older; oldest first: Later only). */
export function Pager({
  first,
  firstLabel = 'Newest',
  newer = null,
  older = null,
  oldestFirst = false,
}: {
  first: string | null;
  firstLabel?: string;
  newer?: string | null;
  older?: string | null;
  oldestFirst?: boolean;
}) {
  return (
    <nav class="pager" aria-label="Pages">
      {first ? (
        <a class="button" href={first}>
          {firstLabel}
        </a>
      ) : null}
      {newer ? (
        <a class="button" href={newer} rel="prev">
          {oldestFirst ? 'Later' : 'Newer'}
        </a>
      ) : null}
      {older ? (
        <a class="button" href={older} rel="next">
          Older
        </a>
      ) : null}
    </nav>
  );
}
