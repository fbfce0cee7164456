import { useEffect, useState } from 'preact/hooks';

// A value with listeners: the few pieces of state pages share (who signed
// in, the location, the live counts) without a state library.
export interface Store<T> {
  get(): T;
  set(value: T): void;
  subscribe(listener: () => void): () => void;
}

export function store<T>(initial: T): Store<T> {
  let value = initial;
  const listeners = new Set<() => void>();
  return {
    get: () => value,
    set(next) {
      if (Object.is(next, value)) return;
      value = next;
      for (const l of [...listeners]) l();
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

export function useStore<T>(s: Store<T>): T {
  const [, rerender] = useState(0);
  useEffect(() => s.subscribe(() => rerender((n) => n + 1)), [s]);
  return s.get();
}
