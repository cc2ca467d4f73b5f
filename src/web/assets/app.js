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

// Uploads on the files page: a picker (files or a whole folder) or drag-and-drop. One batch is one
// upload session (one mailbox version): the session is started with a client key kept in
// localStorage, each file's bytes go to the session with the page's CSRF token (three at a time,
// a progress bar per file and overall), then the session is finalized. The key, the session id
// and what was sent (path, size, modification time, SHA-256) stay in localStorage until the batch
// is finished, so after a reload dropping the same files again sends only those the session lacks.
(function () {
  'use strict';
  function start() {
    const box = document.querySelector('[data-upload]');
    if (!box) return;
    const url = box.getAttribute('data-upload');
    const folder = box.getAttribute('data-folder');
    const storeKey = 'cubby.upload.' + box.getAttribute('data-mailbox');
    const csrf = document.body.getAttribute('data-csrf');
    const progress = box.querySelector('[data-progress]');
    const overall = box.querySelector('[data-overall]');
    const overallText = box.querySelector('[data-overall-text]');
    const list = box.querySelector('[data-files]');
    const zone = box.querySelector('[data-dropzone]');
    const message = box.querySelector('[data-upload-message]');
    const resume = box.querySelector('[data-resume]');
    let busy = false;

    function say(text, kind) {
      message.hidden = !text;
      message.textContent = text || '';
      message.className = 'small' + (kind === 'bad' ? ' error' : '');
    }
    function load() {
      try {
        return JSON.parse(localStorage.getItem(storeKey) || 'null');
      } catch {
        return null;
      }
    }
    let saveTimer = 0;
    function save(record, now) {
      clearTimeout(saveTimer);
      const write = () => (record ? localStorage.setItem(storeKey, JSON.stringify(record)) : localStorage.removeItem(storeKey));
      if (now) write();
      else saveTimer = setTimeout(write, 300);
    }
    async function call(method, path, body) {
      const res = await fetch(path, {
        method,
        credentials: 'same-origin',
        headers: Object.assign({ 'x-csrf-token': csrf }, body ? { 'content-type': 'application/json' } : {}),
        body: body ? JSON.stringify(body) : undefined,
      });
      let data = {};
      try {
        data = await res.json();
      } catch {}
      return { status: res.status, ok: res.ok, data };
    }
    function untilText(iso) {
      return iso ? ' (until ' + new Date(iso).toLocaleTimeString() + ' at the latest)' : '';
    }
    function staleText(status) {
      return status === 'expired'
        ? 'The earlier upload was not finished in time and expired: the files it had not saved were discarded.'
        : 'The earlier upload was ' + (status === 'failed' ? 'canceled' : 'already finished') + '.';
    }
    async function sha256(file) {
      if (!(window.crypto && crypto.subtle)) return null;
      const digest = await crypto.subtle.digest('SHA-256', await file.arrayBuffer());
      return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
    }

    // A batch that was interrupted: say so on arrival, and offer to cancel it.
    async function checkInterrupted() {
      const record = load();
      if (!record || !record.sessionId) return;
      const r = await call('GET', url + '/' + encodeURIComponent(record.sessionId));
      const s = r.data.session;
      if (!r.ok || !s || s.status !== 'pending') {
        save(null, true);
        if (s && s.status === 'expired') say(staleText('expired') + ' Drop or choose the files again to upload them.', 'bad');
        return;
      }
      const done = (r.data.files || []).filter((f) => f.state !== 'declared' && f.state !== 'failed').length;
      resume.hidden = false;
      resume.setAttribute('data-session', s.id);
      box.querySelector('[data-resume-text]').textContent =
        'An upload' + (record.folder ? ' into ' + record.folder + '/' : '') + ' was interrupted after ' + done + ' of ' + (record.total || s.files_count) +
        ' files. Drop or choose the same files again to continue: the ' + done + ' already sent are skipped. Until it is finished or canceled the mailbox accepts no other changes' + untilText(s.uploads_expire_at) + '.';
    }
    resume.querySelector('[data-cancel]').addEventListener('click', async () => {
      const record = load();
      if (record && record.sessionId) await call('POST', url + '/' + encodeURIComponent(record.sessionId) + '/cancel');
      save(null, true);
      resume.hidden = true;
      say('The interrupted upload was canceled; nothing of it was saved.');
    });

    function sendFile(sessionId, file, path, bar) {
      return new Promise((resolve) => {
        const xhr = new XMLHttpRequest();
        xhr.open('POST', url + '/' + encodeURIComponent(sessionId) + '/files?path=' + encodeURIComponent(path));
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
          if (xhr.status === 413) body.error = 'Too large: a file sent from the browser may have at most 100 MB; the API and the CLI take larger ones.';
          resolve({ ok: xhr.status === 200, status: xhr.status, body });
        };
        xhr.onerror = () => resolve({ ok: false, status: 0, body: { error: 'network error' } });
        xhr.send(file);
      });
    }

    async function upload(items) {
      if (busy) return say('An upload is running on this page; drop or choose more files once it is finished.');
      if (!items.length) return;
      busy = true;
      box.removeAttribute('data-finished');
      say('');
      progress.hidden = false;
      list.textContent = '';
      const rows = items.map((i) => {
        i.path = (folder ? folder + '/' : '') + i.rel;
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
        return { li, bar, status };
      });
      const mark = (n, state, text, good) => {
        rows[n].li.setAttribute('data-state', state);
        rows[n].status.textContent = text;
        rows[n].status.className = good === undefined ? 'tag' : good ? 'tag ok' : 'tag bad';
      };
      const totalBytes = items.reduce((n, i) => n + i.file.size, 0) || 1;
      let doneBytes = 0;
      let finished = 0;
      let failed = 0;
      const tick = () => {
        overall.value = doneBytes / totalBytes;
        overallText.textContent = finished + ' of ' + items.length + ' files sent' + (failed ? ', ' + failed + ' failed' : '');
      };
      const finish = (state, text, kind) => {
        busy = false;
        box.setAttribute('data-finished', state);
        say(text, kind);
      };

      // Start the session, or get back the one this browser started (same client key).
      let record = load();
      const key = record && record.key ? record.key : 'web-' + Date.now().toString(36) + '-' + Math.random().toString(36).slice(2, 12);
      const started = await call('POST', url, { key, expected_file_count: items.length });
      if (!started.ok) {
        const d = started.data;
        const text =
          d.code === 'MAILBOX_LOCKED'
            ? 'Another batch upload holds this mailbox' + untilText(d.details && d.details.locked_until) + ' (from the API, the CLI or another tab). Try again once it is finished.'
            : d.error || 'The upload could not start (' + started.status + ').';
        return finish('refused', text, 'bad');
      }
      const session = started.data.session;
      let known = new Map();
      if (record && record.sessionId && record.sessionId !== session.id) {
        const old = await call('GET', url + '/' + encodeURIComponent(record.sessionId));
        say(staleText(old.data.session ? old.data.session.status : 'expired') + ' Starting again: every file is sent.');
        record = null;
      }
      if (!record || record.sessionId !== session.id) record = { key, sessionId: session.id, folder, total: items.length, files: {} };
      else record.total = Math.max(record.total || 0, items.length);
      save(record, true);
      resume.hidden = true;
      if (started.data.replayed) {
        const state = await call('GET', url + '/' + encodeURIComponent(session.id));
        known = new Map((state.data.files || []).map((f) => [f.path, f]));
      }

      // Files the session already has with the same content are not sent again.
      const todo = [];
      for (let n = 0; n < items.length; n++) {
        const have = known.get(items[n].path);
        if (have && have.state !== 'declared' && have.state !== 'failed') {
          const mine = record.files[items[n].path];
          const same = mine && mine.size === items[n].file.size && mine.modified === items[n].file.lastModified ? mine.sha256 : await sha256(items[n].file);
          if (same === have.sha256) {
            mark(n, 'kept', 'already sent', true);
            rows[n].bar.value = 1;
            doneBytes += items[n].file.size;
            finished++;
            continue;
          }
        }
        todo.push(n);
      }
      tick();

      let stale = null;
      let next = 0;
      async function worker() {
        while (next < todo.length && !stale) {
          const n = todo[next++];
          const item = items[n];
          mark(n, 'sending', 'uploading');
          // A network error or a server error is tried twice more before the file counts as failed.
          let r = await sendFile(session.id, item.file, item.path, rows[n].bar);
          for (let retry = 0; retry < 2 && !r.ok && (r.status === 0 || r.status >= 500); retry++) r = await sendFile(session.id, item.file, item.path, rows[n].bar);
          rows[n].bar.value = 1;
          if (r.ok) {
            mark(n, r.body.state === 'skipped' ? 'kept' : 'sent', r.body.state === 'skipped' ? 'already there' : 'sent', true);
            record.files[item.path] = { size: item.file.size, modified: item.file.lastModified, sha256: r.body.sha256 };
            save(record);
          } else {
            failed++;
            mark(n, 'failed', r.body.error || 'failed (' + r.status + ')', false);
            if (r.body.code === 'UPLOAD_SESSION_CLOSED' || r.body.code === 'UPLOAD_SESSION_NOT_FOUND') stale = r.body;
          }
          doneBytes += item.file.size;
          finished++;
          tick();
        }
      }
      await Promise.all([worker(), worker(), worker()]);
      save(record, true);
      if (stale) {
        save(null, true);
        return finish('stale', staleText((stale.details && stale.details.status) || 'expired') + ' Drop or choose the files again to upload them in a new batch.', 'bad');
      }
      if (failed) return finish('with-errors', failed + ' of ' + items.length + ' files were not sent. Drop or choose them again to retry (the others are kept), or cancel the upload.', 'bad');

      overallText.textContent = 'Saving ' + items.length + ' files as one version…';
      let fin;
      do fin = await call('POST', url + '/' + encodeURIComponent(session.id) + '/finalize');
      while (fin.ok && fin.data.finalize_pending);
      if (!fin.ok) {
        if (fin.data.code === 'UPLOAD_SESSION_CLOSED') save(null, true);
        return finish('with-errors', fin.data.error || 'The upload could not be saved (' + fin.status + ').', 'bad');
      }
      save(null, true);
      overall.value = 1;
      overallText.textContent = items.length + ' of ' + items.length + ' files uploaded in one version.';
      // The folder's listing is drawn again from a fresh render; the progress stays in view.
      try {
        const res = await fetch(location.href, { credentials: 'same-origin', cache: 'no-store' });
        const fresh = res.ok ? new DOMParser().parseFromString(await res.text(), 'text/html').getElementById('listing') : null;
        const listing = document.getElementById('listing');
        if (fresh && listing) listing.replaceWith(document.importNode(fresh, true));
      } catch {}
      finish('ok', '');
    }

    box.querySelectorAll('[data-pick]').forEach((input) =>
      input.addEventListener('change', () => {
        const items = Array.from(input.files).map((f) => ({ file: f, rel: f.webkitRelativePath || f.name }));
        items.sort(byPath);
        upload(items);
        input.value = '';
      }),
    );

    // The same order on every pick and drop, so a resumed batch walks the files as the first did.
    function byPath(a, b) {
      return a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0;
    }

    function readEntry(entry, prefix) {
      return new Promise((resolve) => {
        if (entry.isFile) entry.file((f) => resolve([{ file: f, rel: prefix + f.name }]), () => resolve([]));
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
      const items = entries.length ? (await Promise.all(entries.map((en) => readEntry(en, '')))).flat() : Array.from(e.dataTransfer.files).map((f) => ({ file: f, rel: f.name }));
      items.sort(byPath);
      upload(items);
    });
    box.setAttribute('data-ready', '1');
    checkInterrupted();
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

// An address change or alias add waiting for activation: the page asks for its state every two
// seconds and, once it settles (active or failed), redraws the address card from a fresh render
// of the settings page, so a new alias shows in the list without a reload.
document.addEventListener('DOMContentLoaded', () => {
  const card = document.getElementById('address-card');
  if (!card || card.getAttribute('data-assignment-state') !== 'pending') return;
  const poll = card.getAttribute('data-assignment-poll');
  const page = poll.replace(/\/assignment$/, '');
  let tries = 0;
  async function check() {
    tries++;
    let state = 'pending';
    try {
      const res = await fetch(poll, { credentials: 'same-origin', cache: 'no-store' });
      if (res.ok) state = (await res.json()).status;
    } catch {}
    if (state === 'pending') {
      // Every two seconds for ten minutes, then every half minute.
      setTimeout(check, tries < 300 ? 2000 : 30000);
      return;
    }
    const res = await fetch(page, { credentials: 'same-origin', cache: 'no-store' });
    const fresh = res.ok ? new DOMParser().parseFromString(await res.text(), 'text/html').getElementById('address-card') : null;
    const current = document.getElementById('address-card');
    if (fresh && current) {
      current.replaceWith(document.importNode(fresh, true));
      // The new card's copy buttons.
      document.querySelectorAll('#address-card [data-copy]').forEach((b) => {
        b.hidden = false;
        b.addEventListener('click', () => navigator.clipboard.writeText(b.getAttribute('data-copy')).catch(() => {}));
      });
    } else location.reload();
  }
  setTimeout(check, 2000);
});
