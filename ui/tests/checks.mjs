// What the browser tests share: a check that prints "ok" or "FAIL" with
// the first lines of its error and how long it took (a step that fails
// only on a loaded machine shows how near its waits it ran), and goes on;
// an assertion; and the closing "N passed, M failed" line and exit code.
let passed = 0;
let failed = 0;

export async function check(name, fn) {
  const started = Date.now();
  const took = () => `(${((Date.now() - started) / 1000).toFixed(1)} s)`;
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} ${took()}`);
    return true;
  } catch (e) {
    failed++;
    console.log(`FAIL ${name} ${took()}: ${e instanceof Error ? e.message.split('\n').slice(0, 6).join('\n     ') : e}`);
    return false;
  }
}

export function assert(cond, message) {
  if (!cond) throw new Error(message);
}

export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
