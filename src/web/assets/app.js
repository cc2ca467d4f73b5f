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
  });
})();

// Uploads on the files page: a picker (files or a whole folder) or drag-and-drop; each file is
// sent to the upload route with the page's CSRF token, with a progress bar per file and overall.
(function () {
  'use strict';
  function start() {
    const box = document.querySelector('[data-upload]');
    if (!box) return;
    const url = box.getAttribute('data-upload');
    const folder = box.getAttribute('data-folder');
    const csrf = document.body.getAttribute('data-csrf');
    const progress = box.querySelector('[data-progress]');
    const overall = box.querySelector('[data-overall]');
    const overallText = box.querySelector('[data-overall-text]');
    const list = box.querySelector('[data-files]');
    const zone = box.querySelector('[data-dropzone]');

    function send(file, rel, bar, status) {
      return new Promise((resolve) => {
        const path = (folder ? folder + '/' : '') + rel;
        const xhr = new XMLHttpRequest();
        xhr.open('POST', url + '?path=' + encodeURIComponent(path));
        xhr.setRequestHeader('content-type', 'application/octet-stream');
        xhr.setRequestHeader('x-csrf-token', csrf);
        xhr.upload.onprogress = (e) => {
          if (e.lengthComputable) bar.value = e.loaded / e.total;
        };
        xhr.onload = () => {
          let body = {};
          try {
            body = JSON.parse(xhr.responseText);
          } catch {}
          const ok = xhr.status === 200;
          bar.value = 1;
          status.textContent = ok ? (body.skipped ? 'already there' : 'done') : body.error || 'failed (' + xhr.status + ')';
          status.className = ok ? 'tag ok' : 'tag bad';
          resolve(ok);
        };
        xhr.onerror = () => {
          status.textContent = 'network error';
          status.className = 'tag bad';
          resolve(false);
        };
        xhr.send(file);
      });
    }

    async function upload(items) {
      if (!items.length) return;
      progress.hidden = false;
      list.textContent = '';
      const total = items.reduce((n, i) => n + i.file.size, 0) || 1;
      let done = 0;
      let failed = 0;
      let finished = 0;
      const rows = items.map((i) => {
        const li = document.createElement('li');
        const name = document.createElement('span');
        name.className = 'main';
        name.textContent = i.path;
        const bar = document.createElement('progress');
        bar.max = 1;
        bar.value = 0;
        bar.setAttribute('aria-label', 'Upload of ' + i.path);
        const status = document.createElement('span');
        status.className = 'tag';
        status.textContent = 'waiting';
        li.append(name, bar, status);
        list.append(li);
        return { bar, status };
      });
      // Three at a time: quick for many small files, gentle on the server.
      let next = 0;
      async function worker() {
        while (next < items.length) {
          const n = next++;
          rows[n].status.textContent = 'uploading';
          const ok = await send(items[n].file, items[n].path, rows[n].bar, rows[n].status);
          if (!ok) failed++;
          done += items[n].file.size;
          finished++;
          overall.value = done / total;
          overallText.textContent = `${finished} of ${items.length} files sent${failed ? `, ${failed} failed` : ''}`;
        }
      }
      await Promise.all([worker(), worker(), worker()]);
      overall.value = 1;
      overallText.textContent = `${items.length - failed} of ${items.length} files uploaded${failed ? `, ${failed} failed` : ''}.`;
      box.setAttribute('data-finished', failed ? 'with-errors' : 'ok');
      if (!failed) setTimeout(() => location.reload(), 800);
    }

    box.querySelectorAll('[data-pick]').forEach((input) =>
      input.addEventListener('change', () => {
        upload(Array.from(input.files).map((f) => ({ file: f, path: f.webkitRelativePath || f.name })));
      }),
    );

    function readEntry(entry, prefix) {
      return new Promise((resolve) => {
        if (entry.isFile) entry.file((f) => resolve([{ file: f, path: prefix + f.name }]), () => resolve([]));
        else if (entry.isDirectory) {
          const reader = entry.createReader();
          const all = [];
          const more = () =>
            reader.readEntries(async (batch) => {
              if (!batch.length) {
                const nested = await Promise.all(all.map((e) => readEntry(e, prefix + entry.name + '/')));
                resolve(nested.flat());
              } else {
                all.push(...batch);
                more();
              }
            }, () => resolve([]));
          more();
        } else resolve([]);
      });
    }
    zone.addEventListener('dragover', (e) => {
      e.preventDefault();
      zone.classList.add('over');
    });
    zone.addEventListener('dragleave', () => zone.classList.remove('over'));
    zone.addEventListener('drop', async (e) => {
      e.preventDefault();
      zone.classList.remove('over');
      const entries = Array.from(e.dataTransfer.items || [])
        .map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null))
        .filter(Boolean);
      const items = entries.length ? (await Promise.all(entries.map((en) => readEntry(en, '')))).flat() : Array.from(e.dataTransfer.files).map((f) => ({ file: f, path: f.name }));
      upload(items);
    });
  }
  document.addEventListener('DOMContentLoaded', start);
})();

// The live channel: a ticket from the page's own session, then the ActionCable socket on /cable.
// Reconnects with a fresh ticket after a drop. `onEvent` gets each event body.
function cubbyLive(ticketUrl, onOpen, onEvent, onClose) {
  let delay = 1000;
  async function connect() {
    let ticket;
    try {
      const res = await fetch(ticketUrl, { credentials: 'same-origin' });
      if (!res.ok) throw new Error(String(res.status));
      ticket = await res.json();
    } catch {
      return retry();
    }
    const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/cable?email_subscription_token=${encodeURIComponent(ticket.token)}`, ['actioncable-v1-json']);
    const identifier = JSON.stringify({ channel: ticket.channel, mailbox_id: ticket.mailbox_id });
    ws.onmessage = (e) => {
      let msg;
      try {
        msg = JSON.parse(e.data);
      } catch {
        return;
      }
      if (msg.type === 'welcome') ws.send(JSON.stringify({ command: 'subscribe', identifier }));
      else if (msg.type === 'confirm_subscription') {
        delay = 1000;
        onOpen();
      } else if (msg.message && msg.identifier === identifier) onEvent(msg.message);
    };
    ws.onclose = () => {
      onClose();
      retry();
    };
  }
  function retry() {
    setTimeout(connect, delay);
    delay = Math.min(delay * 2, 30000);
  }
  connect();
}

// The live mail list: on each event the new rows (rendered by the server) go on top, and the
// unread count shows in the tab title.
document.addEventListener('DOMContentLoaded', () => {
  const list = document.querySelector('ul.rows[data-live]');
  if (!list) return;
  const ticketUrl = list.getAttribute('data-live');
  const base = ticketUrl.replace(/\/live$/, '');
  const title = document.title.replace(/^\(\d+\) /, '');
  const counter = document.getElementById('unread-count');
  let fetching = Promise.resolve();
  const topSeq = () => {
    const first = list.querySelector(':scope > li[data-seq]');
    return first ? first.getAttribute('data-seq') : '0';
  };
  const showUnread = (n) => {
    if (counter) counter.textContent = String(n);
    document.title = n > 0 ? `(${n}) ${title}` : title;
  };
  async function refresh() {
    const res = await fetch(`${base}/rows?after=${topSeq()}`, { credentials: 'same-origin' });
    if (!res.ok) return;
    const text = await res.text();
    if (text) {
      const empty = list.parentElement.querySelector('.empty');
      if (empty) empty.remove();
      list.insertAdjacentHTML('afterbegin', text);
      list.querySelectorAll(':scope > li:not(.seen)').forEach((li) => li.classList.add('seen', 'fresh'));
    }
    showUnread(Number(res.headers.get('x-unread-count') || '0'));
  }
  list.querySelectorAll(':scope > li').forEach((li) => li.classList.add('seen'));
  showUnread(Number(counter ? counter.textContent : '0'));
  cubbyLive(
    ticketUrl,
    () => {
      list.setAttribute('data-live-state', 'open');
      fetching = fetching.then(refresh); // catch up with what arrived before the subscription
    },
    () => (fetching = fetching.then(refresh)),
    () => list.setAttribute('data-live-state', 'closed'),
  );
});

// The live event viewer on the settings page: each event body, newest first.
document.addEventListener('DOMContentLoaded', () => {
  const pre = document.querySelector('[data-live-events]');
  if (!pre) return;
  const seen = [];
  cubbyLive(
    pre.getAttribute('data-live-events'),
    () => {
      pre.setAttribute('data-live-state', 'open');
      if (!seen.length) pre.textContent = 'Connected. Waiting for events…';
    },
    (body) => {
      seen.unshift(JSON.stringify(body, null, 2));
      seen.length = Math.min(seen.length, 20);
      pre.textContent = seen.join('\n\n');
    },
    () => pre.setAttribute('data-live-state', 'closed'),
  );
});

// A card that shows a build in progress reloads the page every two seconds until it settles.
document.addEventListener('DOMContentLoaded', () => {
  if (document.querySelector('[data-refresh-while-pending]')) setTimeout(() => location.reload(), 2000);
});

// The site name field says whether a name is free as the person types.
document.addEventListener('DOMContentLoaded', () => {
  const input = document.querySelector('input[data-slug-check]');
  const status = document.getElementById('slug-status');
  if (!input || !status) return;
  let timer = 0;
  let asked = 0;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const n = ++asked;
      const res = await fetch(`${input.getAttribute('data-slug-check')}?slug=${encodeURIComponent(input.value)}`, { credentials: 'same-origin' });
      const body = await res.json().catch(() => ({ available: false, message: 'Could not check.' }));
      if (n !== asked) return;
      status.textContent = body.message;
      status.className = `small ${body.available ? 'ok-text' : 'error'}`;
      input.setAttribute('data-slug-available', body.available ? 'yes' : 'no');
    }, 250);
  });
});
