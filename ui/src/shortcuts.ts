import { useEffect } from 'preact/hooks';
import { navigate } from './router';

// Keys an operator uses all night: "/" to the search box, "g" then a
// letter to a page (as GitHub and Gmail do). Not while typing in a field,
// nor with a modifier held (the browser's own shortcuts stay its own).

export const pages: Record<string, [string, string]> = {
  o: ['/', 'Overview'],
  i: ['/interfaces', 'Interfaces'],
  q: ['/quarantine', 'Quarantine'],
  a: ['/alerts', 'Alerts'],
  l: ['/audit', 'Audit log'],
  t: ['/tokens', 'My tokens'],
};

function typing(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName);
}

export function useShortcuts(): void {
  useEffect(() => {
    let pendingG = 0;
    const onKey = (e: KeyboardEvent) => {
      if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
      // A dialog open: its keys are its own.
      if (document.querySelector('dialog[open]')) return;
      if (e.key === '/') {
        const box = document.querySelector<HTMLInputElement>('[data-search]');
        if (box) {
          e.preventDefault();
          box.focus();
          box.select();
        }
        return;
      }
      if (e.key === 'g') {
        pendingG = Date.now();
        return;
      }
      const to = pages[e.key];
      if (to && Date.now() - pendingG < 1500) {
        pendingG = 0;
        e.preventDefault();
        navigate(to[0]);
      }
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);
}
