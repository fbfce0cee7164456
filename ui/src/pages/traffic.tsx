import { useEffect, useState } from 'preact/hooks';
import { call, type Answer } from '../api/client';
import { ErrorNote, formatTime, useApi } from '../components/ui';

// An interface's traffic as the engine keeps it a minute at a time
// (GET /interfaces/{name}/stats): received, and its destinations' sent,
// filtered and quarantined, as lines over the last hour (per minute), day
// or week (per hour). SVG drawn here: a chart library would cost more than
// the whole console. The figures are in a table too, for a screen reader.

type Stats = Answer<'/api/v1/interfaces/{name}/stats'>;

const windows = {
  hour: { label: 'Last hour', step: '1m' as const, seconds: 3600 },
  day: { label: 'Last day', step: '1h' as const, seconds: 86400 },
  week: { label: 'Last week', step: '1h' as const, seconds: 7 * 86400 },
};
type Window = keyof typeof windows;

const series = [
  { key: 'received', label: 'received', cls: 'received' },
  { key: 'sent', label: 'sent', cls: 'sent' },
  { key: 'filtered', label: 'filtered', cls: 'filtered' },
  { key: 'quarantined', label: 'quarantined', cls: 'quarantined' },
] as const;
type Key = (typeof series)[number]['key'];
type Step = { at: number } & Record<Key, number>;

/** Every step from `from` to `to`, zero where the answer has nothing. */
export function steps(s: Stats): Step[] {
  const size = s.step === '1m' ? 60_000 : 3_600_000;
  const from = Date.parse(s.from);
  const to = Date.parse(s.to);
  const out: Step[] = [];
  const index = new Map<number, Step>();
  for (let t = from; t < to; t += size) {
    const step = { at: t, received: 0, sent: 0, filtered: 0, quarantined: 0 };
    out.push(step);
    index.set(t, step);
  }
  for (const p of s.intake) {
    const step = index.get(Date.parse(p.at));
    if (step) step.received += p.received;
  }
  for (const d of s.destinations)
    for (const p of d.points) {
      const step = index.get(Date.parse(p.at));
      if (!step) continue;
      step.sent += p.sent;
      step.filtered += p.filtered;
      step.quarantined += p.quarantined;
    }
  return out;
}

const W = 720;
const H = 180;
const PAD = { left: 44, right: 8, top: 10, bottom: 22 };

function clock(t: number, withDay: boolean): string {
  const s = formatTime(new Date(t));
  return withDay ? s.slice(5, 16) : s.slice(11, 16);
}

export function TrafficChart({ name }: { name: string }) {
  const [win, setWin] = useState<Window>('hour');
  const w = windows[win];
  const stats = useApi(() => {
    const to = new Date();
    const from = new Date(to.getTime() - w.seconds * 1000);
    return call('get', '/api/v1/interfaces/{name}/stats', {
      path: { name },
      query: { step: w.step, from: from.toISOString(), to: to.toISOString() },
    });
  }, [name, win]);
  // The hour's chart moves with the minutes.
  useEffect(() => {
    const t = window.setInterval(() => void stats.reload(), win === 'hour' ? 30_000 : 300_000);
    return () => window.clearInterval(t);
  }, [stats.reload, win]);

  const data = stats.data ? steps(stats.data) : [];
  const totals = data.reduce(
    (t, s) => {
      for (const { key } of series) t[key] += s[key];
      return t;
    },
    { received: 0, sent: 0, filtered: 0, quarantined: 0 } as Record<Key, number>,
  );
  const max = Math.max(1, ...data.flatMap((s) => series.map(({ key }) => s[key])));
  const x = (i: number) => PAD.left + (data.length <= 1 ? 0 : (i * (W - PAD.left - PAD.right)) / (data.length - 1));
  const y = (v: number) => PAD.top + (H - PAD.top - PAD.bottom) * (1 - v / max);
  const withDay = win !== 'hour';
  const busy = data.filter((s) => series.some(({ key }) => s[key] > 0));
  return (
    <div class="traffic">
      <div class="segmented" role="group" aria-label="Period">
        {(Object.keys(windows) as Window[]).map((k) => (
          <button key={k} class="button small" aria-pressed={k === win} onClick={() => setWin(k)}>
            {windows[k].label}
          </button>
        ))}
      </div>
      <ErrorNote message={stats.error} />
      <figure
        class="chart"
        data-chart={win}
        data-received={totals.received}
        data-sent={totals.sent}
        data-filtered={totals.filtered}
        data-quarantined={totals.quarantined}
      >
        <figcaption>
          {w.label}, per {w.step === '1m' ? 'minute' : 'hour'}:{' '}
          {series.map(({ key, label, cls }, i) => (
            <span key={key} class={`legend ${cls}`}>
              {i ? ', ' : ''}
              <span class="swatch" aria-hidden="true" /> {totals[key].toLocaleString('en')} {label}
            </span>
          ))}
        </figcaption>
        {data.length > 0 && (
          <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${w.label}: ${totals.received} received, ${totals.sent} sent`}>
            <line class="axis" x1={PAD.left} y1={y(0)} x2={W - PAD.right} y2={y(0)} />
            <line class="grid" x1={PAD.left} y1={y(max)} x2={W - PAD.right} y2={y(max)} />
            <text class="tick" x={PAD.left - 6} y={y(max) + 4} text-anchor="end">
              {max.toLocaleString('en')}
            </text>
            <text class="tick" x={PAD.left - 6} y={y(0) + 4} text-anchor="end">
              0
            </text>
            {[0, Math.floor((data.length - 1) / 2), data.length - 1].map((i) => (
              <text key={i} class="tick" x={x(i)} y={H - 6} text-anchor={i === 0 ? 'start' : i === data.length - 1 ? 'end' : 'middle'}>
                {clock(data[i]!.at, withDay)}
              </text>
            ))}
            {series.map(({ key, cls }) => (
              <polyline key={key} class={`line ${cls}`} points={data.map((s, i) => `${x(i).toFixed(1)},${y(s[key]).toFixed(1)}`).join(' ')} />
            ))}
          </svg>
        )}
        <table class="visually-hidden">
          <caption>{w.label}: steps with traffic</caption>
          <thead>
            <tr>
              <th scope="col">From</th>
              {series.map(({ key, label }) => (
                <th key={key} scope="col">
                  {label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {busy.map((s) => (
              <tr key={s.at}>
                <th scope="row">{formatTime(new Date(s.at))}</th>
                {series.map(({ key }) => (
                  <td key={key}>{s[key]}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </figure>
    </div>
  );
}
