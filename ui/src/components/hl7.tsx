import type { JSX } from 'preact';
import { useState } from 'preact/hooks';

// HL7 v2 shown a segment per line; each field (and component) carries its
// position, e.g. PID-5.1, as a tooltip for the mouse and, for the keyboard,
// in the line below the block: arrow keys move between fields.

interface Piece {
  text: string;
  pos?: string;
}

export function isHl7(text: string): boolean {
  return /^MSH.{5}/.test(text) || /^(FHS|BHS)/.test(text);
}

function pieces(segment: string, fs: string, cs: string, rs: string): Piece[] {
  const fields = segment.split(fs);
  const name = fields[0] ?? '';
  const out: Piece[] = [{ text: name }];
  const header = name === 'MSH' || name === 'FHS' || name === 'BHS';
  fields.slice(1).forEach((field, i) => {
    out.push({ text: fs });
    // MSH-1 is the separator itself, so MSH's fields count one further.
    const n = header ? i + 2 : i + 1;
    if (!field) return;
    if (header && n === 2) {
      out.push({ text: field, pos: `${name}-2` });
      return;
    }
    const reps = field.split(rs);
    reps.forEach((rep, r) => {
      if (r > 0) out.push({ text: rs });
      const label = reps.length > 1 ? `${name}-${n}(${r + 1})` : `${name}-${n}`;
      const comps = rep.split(cs);
      if (comps.length === 1) {
        if (rep) out.push({ text: rep, pos: label });
        return;
      }
      comps.forEach((c, k) => {
        if (k > 0) out.push({ text: cs });
        if (c) out.push({ text: c, pos: `${label}.${k + 1}` });
      });
    });
  });
  return out;
}

export function Hl7({ text, label }: { text: string; label: string }) {
  const [focused, setFocused] = useState<string | null>(null);
  const segments = text.split(/\r\n|\r|\n/).filter((s) => s.length > 0);
  const msh = segments.find((s) => /^(MSH|FHS|BHS)/.test(s)) ?? '';
  const fs = msh.charAt(3) || '|';
  const cs = msh.charAt(4) || '^';
  const rs = msh.charAt(5) || '~';

  const move = (e: JSX.TargetedKeyboardEvent<HTMLDivElement>) => {
    const box = e.currentTarget;
    const all = Array.from(box.querySelectorAll<HTMLElement>('[data-pos]'));
    if (all.length === 0) return;
    const at = all.indexOf(document.activeElement as HTMLElement);
    let to = -1;
    if (e.key === 'ArrowRight') to = at < 0 ? 0 : Math.min(all.length - 1, at + 1);
    else if (e.key === 'ArrowLeft') to = at < 0 ? 0 : Math.max(0, at - 1);
    else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      const lines = Array.from(box.querySelectorAll<HTMLElement>('.seg'));
      const line = at < 0 ? -1 : lines.findIndex((l) => l.contains(all[at]!));
      const target = lines[e.key === 'ArrowDown' ? line + 1 : Math.max(0, line - 1)];
      const first = target?.querySelector<HTMLElement>('[data-pos]');
      if (first) to = all.indexOf(first);
    } else if (e.key === 'Home') to = 0;
    else if (e.key === 'End') to = all.length - 1;
    if (to < 0) return;
    e.preventDefault();
    all[to]!.focus();
  };

  return (
    <div class="hl7-wrap">
      <div
        class="hl7"
        tabIndex={0}
        role="group"
        aria-label={`${label}: HL7, a segment per line; arrow keys move between fields`}
        onKeyDown={move}
        onFocusIn={(e) => {
          const t = e.target as HTMLElement;
          setFocused(t.dataset['pos'] ? `${t.dataset['pos']} = ${t.textContent ?? ''}` : null);
        }}
      >
        {segments.map((s, i) => (
          <div class="seg" key={i}>
            {pieces(s, fs, cs, rs).map((p, k) =>
              p.pos ? (
                <span key={k} class="f" title={p.pos} data-pos={p.pos} tabIndex={-1}>
                  {p.text}
                </span>
              ) : (
                <span key={k} class={k === 0 ? 'segname' : 'sep'}>
                  {p.text}
                </span>
              ),
            )}
          </div>
        ))}
      </div>
      <div class="hl7-pos muted" aria-live="polite">
        {focused ?? 'Hover a field, or focus the message and use the arrow keys, to see its position.'}
      </div>
    </div>
  );
}
