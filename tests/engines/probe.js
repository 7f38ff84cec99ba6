// Injected by the cross-engine test server as the first script of every page it serves, after
// the page's Content-Security-Policy (so the CSP governs it too: it is a same-origin script).
// WebDriver has no console or CSP events in every engine; this records them inside the page:
// uncaught errors, rejected promises, failed resource loads, console.error calls and CSP
// violations, for the test to read as `window.__headlabProbe`.
(() => {
  const problems = [];
  const push = (kind, detail) => problems.push(`${kind}: ${detail}`);
  addEventListener('error', (e) => {
    if (e.target && e.target !== window) push('resource failed', e.target.src || e.target.href || e.target.tagName);
    else push('page error', e.message);
  }, true);
  addEventListener('unhandledrejection', (e) => push('unhandled rejection', String(e.reason?.stack ?? e.reason)));
  document.addEventListener('securitypolicyviolation', (e) =>
    push('CSP violation', `${e.violatedDirective} blocked ${e.blockedURI || 'inline'} in ${e.sourceFile}:${e.lineNumber}`));
  const error = console.error.bind(console);
  console.error = (...args) => {
    push('console error', args.map(String).join(' '));
    error(...args);
  };
  // Requests that leave the page's origin (the page makes none at run time).
  const offOrigin = () => performance.getEntriesByType('resource').map((r) => r.name)
    .filter((u) => !u.startsWith(location.origin) && !u.startsWith('data:') && !u.startsWith('blob:'));
  window.__headlabProbe = { problems, offOrigin };
})();
// In a frame whose parent asks for it (`window.__headlabTimeWasm`), every call into the page's
// wasm module is timed, the calls it makes back into wasm counted in it: the longest is the
// longest any of the page's computations held the thread at once, whatever else the engine did
// between calls (style, layout, paint, collection), for the test to read as
// `window.__headlabWasm`. Past 100 ms, a call's stack is taken every 50 ms, when it next calls
// out of wasm (function indices; names from a `wasm-opt -g` build of the same source). Only the
// page's own module is wrapped; its workers' run unwatched.
(() => {
  let asked = false;
  try { asked = window.parent !== window && window.parent.__headlabTimeWasm === true; } catch { /* another origin */ }
  if (!asked) return;
  const watch = { longest: [0, 'none', []], calls: 0 };
  window.__headlabWasm = watch;
  let depth = 0, start = 0, next = 100, stacks = [];
  const timed = (exports) => Object.fromEntries(Object.entries(exports).map(([name, f]) => [name,
    typeof f !== 'function' ? f : function (...args) {
      if (depth++ > 0) try { return f.apply(this, args); } finally { depth--; }
      start = performance.now();
      next = 100;
      stacks = [];
      try { return f.apply(this, args); } finally {
        depth--;
        const took = performance.now() - start;
        watch.calls++;
        if (took > watch.longest[0]) watch.longest = [took, name, stacks];
      }
    }]));
  const sampled = (imports) => imports && Object.fromEntries(Object.entries(imports).map(([module, fns]) => [module,
    Object.fromEntries(Object.entries(fns).map(([name, f]) => [name, typeof f !== 'function' ? f : function (...args) {
      if (depth > 0 && performance.now() - start > next) {
        next += 50;
        const frames = (new Error().stack ?? '').split('\n').slice(2, 12).map((l) => l.match(/wasm-function\[(\d+)\]/)?.[1] ?? l.trim().slice(0, 40));
        stacks.push(`${Math.round(performance.now() - start)} ms, calling ${name}: ${frames.join(' < ')}`);
      }
      return f.apply(this, args);
    }]))]));
  const wrap = (result) => result.instance
    ? { module: result.module, instance: { exports: timed(result.instance.exports) } }
    : { exports: timed(result.exports) };
  const { instantiate, instantiateStreaming } = WebAssembly;
  WebAssembly.instantiate = (source, imports) => instantiate(source, sampled(imports)).then((r) => (r instanceof WebAssembly.Instance ? r : wrap(r)));
  if (instantiateStreaming) WebAssembly.instantiateStreaming = (source, imports) => instantiateStreaming(source, sampled(imports)).then(wrap);
})();
