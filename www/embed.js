// headlab host script: include it once on a page that embeds headlab in iframes.
//
//   <iframe data-headlab src="https://LAB/?embed=1&view=chart" title="headlab: heads against
//           model width" style="width: 100%; border: 0; height: 520px"></iframe>
//   <script src="https://LAB/embed.js" defer></script>
//
// It sizes every iframe marked data-headlab to its content, from the app's "resize" messages,
// and gives the page window.headlab.setTheme(theme[, iframe]) and
// window.headlab.setPreset(id[, iframe]). It reads only messages that come from one of those
// iframes, from that iframe's own origin, and that match the schema (README, "Embedding"); it
// posts only to that origin. No other effect; nothing is fetched.
(() => {
  'use strict';
  const frames = () => [...document.querySelectorAll('iframe[data-headlab]')];
  const originOf = (frame) => {
    try {
      return new URL(frame.src, location.href).origin;
    } catch {
      return null;
    }
  };
  const post = (frame, message) => {
    const origin = originOf(frame);
    if (origin && origin !== 'null') frame.contentWindow?.postMessage({ to: 'headlab', version: 1, ...message }, origin);
  };

  window.addEventListener('message', (event) => {
    const m = event.data;
    if (!m || typeof m !== 'object' || m.from !== 'headlab' || m.version !== 1 || m.type !== 'resize') return;
    const frame = frames().find((f) => f.contentWindow === event.source);
    if (!frame || event.origin !== originOf(frame)) return;
    if (!Number.isFinite(m.height) || m.height < 0) return;
    frame.style.height = `${Math.min(Math.ceil(m.height), 20000)}px`;
  });

  // Frames that started before this script ran have already said their height: ask again.
  const ask = (frame) => post(frame, { type: 'request-size' });
  for (const frame of frames()) {
    ask(frame);
    frame.addEventListener('load', () => ask(frame));
  }

  const each = (frame, fn) => (frame ? [frame] : frames()).forEach(fn);
  window.headlab = Object.freeze({
    /** 'auto' (follow the reader's system), 'light' or 'dark', for one iframe or all. */
    setTheme: (theme, frame) => each(frame, (f) => post(f, { type: 'set-theme', theme })),
    /** Any preset id of the URL (transformer, bert-base, gpt2-large, gpt3, minilm, ...). */
    setPreset: (preset, frame) => each(frame, (f) => post(f, { type: 'set-preset', preset })),
  });
})();
