// Cubby dashboard: small progressive behaviours. Every page works without this file; it adds
// copy buttons, confirmation checks, keyboard navigation, the live mail list and uploads.
'use strict';
(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  // Copy buttons: <button data-copy="text">.
  function initCopy() {
    $$('[data-copy]').forEach((b) => {
      b.hidden = false;
      b.addEventListener('click', async () => {
        try {
          await navigator.clipboard.writeText(b.getAttribute('data-copy'));
          const was = b.textContent;
          b.textContent = 'Copied';
          setTimeout(() => (b.textContent = was), 1500);
        } catch {
          b.textContent = 'Copy failed';
        }
      });
    });
  }

  // Forms that need a typed confirmation: the submit stays disabled until it matches.
  function initConfirm() {
    $$('input[data-confirm]').forEach((input) => {
      const form = input.form;
      const button = form && $('button[type=submit]', form);
      if (!button) return;
      const check = () => (button.disabled = input.value.trim() !== input.getAttribute('data-confirm'));
      input.addEventListener('input', check);
      check();
    });
  }

  // `/` focuses the page's search box; j/k move through rows of a list; Enter opens one.
  function initKeys() {
    const list = $('ul.rows[data-keys]');
    let index = -1;
    const items = () => (list ? $$(':scope > li', list).filter((li) => $('a', li)) : []);
    function select(i) {
      const all = items();
      if (!all.length) return;
      index = Math.max(0, Math.min(all.length - 1, i));
      all.forEach((li, n) => li.classList.toggle('selected', n === index));
      const link = $('a', all[index]);
      link.focus();
    }
    document.addEventListener('keydown', (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const t = e.target;
      if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
      if (e.key === '/') {
        const search = $('input[type=search]');
        if (search) {
          e.preventDefault();
          search.focus();
          search.select();
        }
      } else if (list && (e.key === 'j' || e.key === 'k')) {
        e.preventDefault();
        select(index + (e.key === 'j' ? 1 : -1));
      }
    });
  }

  document.addEventListener('DOMContentLoaded', () => {
    initCopy();
    initConfirm();
    initKeys();
    if (window.CubbyLive) window.CubbyLive();
    if (window.CubbyUploads) window.CubbyUploads();
  });
})();
