// The example handbook page's own theme switch: it themes the page and, through embed.js,
// every embedded headlab.
(() => {
  'use strict';
  const select = document.getElementById('theme');
  select.addEventListener('change', () => {
    const theme = select.value;
    if (theme === 'auto') document.documentElement.removeAttribute('data-theme');
    else document.documentElement.setAttribute('data-theme', theme);
    window.headlab?.setTheme(theme);
  });
})();
