import qrcode from 'qrcode-generator';

/**
 * A QR code of `text` as an SVG: dark modules on white with the four
 * modules of quiet border a phone's camera needs, whatever the theme
 * (scanners read dark on light). Error correction M, the version the text
 * needs.
 */
export function QrCode({ text, label, module = 5 }: { text: string; label: string; module?: number }) {
  const qr = qrcode(0, 'M');
  qr.addData(text);
  qr.make();
  const n = qr.getModuleCount();
  const quiet = 4;
  const size = n + 2 * quiet;
  let d = '';
  for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) if (qr.isDark(r, c)) d += `M${c + quiet} ${r + quiet}h1v1h-1z`;
  return (
    <svg class="qr" role="img" aria-label={label} viewBox={`0 0 ${size} ${size}`} width={size * module} height={size * module} shape-rendering="crispEdges">
      <rect width={size} height={size} fill="#fff" />
      <path d={d} fill="#000" />
    </svg>
  );
}
