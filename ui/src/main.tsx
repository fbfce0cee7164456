import { render } from 'preact';
import { App } from './app';
import { navigate } from './router';
import './styles.css';

// Links inside the console move without a reload; the API's own addresses
// (an export), other origins, new tabs and downloads keep the browser's way.
document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.target as Element | null)?.closest?.('a');
  if (!a || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, window.location.href);
  if (url.origin !== window.location.origin || url.pathname.startsWith('/api/')) return;
  if (url.hash && url.pathname === window.location.pathname && url.search === window.location.search) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});

render(<App />, document.getElementById('app')!);
