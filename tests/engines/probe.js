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
