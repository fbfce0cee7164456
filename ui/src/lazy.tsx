import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';

// Rarely used pages come in chunks of their own, fetched on first use.
export function lazy<P extends object>(load: () => Promise<{ default: ComponentType<P> }>): ComponentType<P> {
  let loaded: ComponentType<P> | null = null;
  let pending: Promise<ComponentType<P>> | null = null;
  return function Lazy(props: P) {
    const [, setReady] = useState(0);
    const [failed, setFailed] = useState<string | null>(null);
    useEffect(() => {
      if (loaded) return;
      pending ??= load().then((m) => (loaded = m.default));
      pending.then(
        () => setReady(1),
        (e: unknown) => {
          // A console updated under an open tab has new chunk names.
          pending = null;
          setFailed(String(e));
        },
      );
    }, []);
    if (failed)
      return (
        <p class="note error" role="alert">
          This page could not be loaded ({failed}). <a href={window.location.href}>Reload</a>
        </p>
      );
    if (!loaded) return <p class="muted" aria-live="polite">Loading…</p>;
    const C = loaded;
    return <C {...props} />;
  };
}
