/**
 * The example's HTML: plain template functions, no framework. Every interpolated value is
 * escaped (`html` below), which matters here: titles, notes and lock labels ("being edited by
 * ...") are user data shown to other users.
 */

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** Markup that is already safe (built by `html`). */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

/** Tagged template: escapes every value except nested Html and arrays of Html; skips null/undefined/false. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += render(value) + strings[i + 1]!;
  });
  return new Html(out);
}

function render(value: unknown): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(value);
}

export interface ItemView {
  id: string;
  title: string;
  status: string;
  notes: string;
}

export interface LockView {
  /** Who holds it, as they chose to be shown ("Alice"), or null. */
  label: string | null;
  mine: boolean;
  expiresAt: Date;
  remainingMs: number;
}

const STATUSES = ['open', 'pending', 'approved', 'refund sent', 'done'] as const;
export type ItemStatus = (typeof STATUSES)[number];
export const ITEM_STATUSES: readonly ItemStatus[] = STATUSES;

const clock = (date: Date) => date.toISOString().slice(11, 19) + ' UTC';
const seconds = (ms: number) => `${Math.max(1, Math.ceil(ms / 1000))} s`;

export function layout(title: string, user: string | undefined, body: Html, flash?: string): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${title} · Work items</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1a202c; background: #f7fafc; }
  header { background: #2b6cb0; color: white; padding: 10px 24px; display: flex; justify-content: space-between; align-items: center; }
  header form { margin: 0; }
  main { padding: 16px 24px; max-width: 860px; }
  table { border-collapse: collapse; width: 100%; background: white; }
  th, td { text-align: left; padding: 8px 10px; border-bottom: 1px solid #e2e8f0; }
  .free { color: #276749; } .mine { color: #2b6cb0; } .held { color: #c05621; font-weight: 600; }
  .notice { padding: 10px 14px; border-radius: 4px; margin: 12px 0; }
  .ok { background: #c6f6d5; } .warn { background: #feebc8; } .error { background: #fed7d7; }
  label { display: block; margin: 10px 0 4px; font-weight: 600; }
  input[type=text], select, textarea { width: 100%; padding: 6px; font: inherit; box-sizing: border-box; }
  button { font: inherit; padding: 6px 14px; margin-top: 12px; }
  .inline { display: inline; }
</style>
</head>
<body>
<header><strong>Work items</strong>${user ? html`<span>Signed in as <b id="user">${user}</b> <form class="inline" method="post" action="/logout"><button id="logout">Log out</button></form></span>` : ''}</header>
<main>
${flash ? html`<p class="notice ok" id="flash">${flash}</p>` : ''}
${body}
</main>
</body>
</html>`.text;
}

export function loginPage(error?: string): string {
  return layout(
    'Sign in',
    undefined,
    html`<h1>Sign in</h1>
${error ? html`<p class="notice error" id="error">${error}</p>` : ''}
<form method="post" action="/login">
  <label for="name">Your name (shown to others while you edit)</label>
  <input type="text" id="name" name="name" maxlength="100" required autofocus>
  <button id="sign-in">Sign in</button>
</form>`,
  );
}

function lockCell(lock: LockView | null): Html {
  if (!lock) return html`<span class="free">free</span>`;
  if (lock.mine) return html`<span class="mine">you are editing (until ${clock(lock.expiresAt)})</span>`;
  return html`<span class="held">being edited by ${lock.label ?? 'someone'}, free in ${seconds(lock.remainingMs)}</span>`;
}

export function listPage(user: string, items: { item: ItemView; lock: LockView | null }[], flash?: string): string {
  return layout(
    'Work items',
    user,
    html`<h1>Work items</h1>
<table id="items">
<thead><tr><th>Item</th><th>Status</th><th>Lock</th><th></th></tr></thead>
<tbody>
${items.map(
  ({ item, lock }) => html`<tr data-id="${item.id}">
  <td class="title">${item.title}</td><td class="status">${item.status}</td><td class="lock">${lockCell(lock)}</td>
  <td><a class="edit" href="/items/${item.id}/edit">Edit</a></td>
</tr>`,
)}
</tbody>
</table>
<p><a href="/admin/locks">All current locks</a></p>`,
    flash,
  );
}

/**
 * The item's fields: `edit` (a form's inputs), `disabled` (shown, greyed out), or `readonly` (shown
 * as text the user can still select and copy; a select cannot be read-only, so the status is text).
 * `prefix` keeps ids unique when one page shows two versions.
 */
function itemFields(item: { title: string; status: string; notes: string }, mode: 'edit' | 'disabled' | 'readonly', prefix = ''): Html {
  // Attributes, each with its leading space: the form's names, and how the fields are locked.
  const name = (field: string) => (mode === 'edit' ? html` name="${field}"` : '');
  const locked = mode === 'disabled' ? html` disabled` : mode === 'readonly' ? html` readonly` : '';
  const status =
    mode === 'readonly'
      ? html`<input type="text" id="${prefix}status" value="${item.status}" readonly>`
      : html`<select id="${prefix}status"${name('status')}${locked}>
    ${ITEM_STATUSES.map((option) => html`<option${option === item.status ? html` selected` : ''}>${option}</option>`)}
  </select>`;
  return html`<label for="${prefix}title">Title</label>
  <input type="text" id="${prefix}title"${name('title')} value="${item.title}" maxlength="200"${locked}>
  <label for="${prefix}status">Status</label>
  ${status}
  <label for="${prefix}notes">Notes</label>
  <textarea id="${prefix}notes"${name('notes')} rows="4" maxlength="2000"${locked}>${item.notes}</textarea>`;
}

/** How the edit page keeps its lock alive (see the page script below). */
export interface KeepAliveView {
  /** Milliseconds between heartbeats while the user is working on the page. */
  everyMs: number;
  /** Show the warning when less than this is left on the lock. */
  warnBeforeMs: number;
  /** Stop renewing after this long without input on the page (an abandoned tab lets the lock expire). */
  idleAfterMs: number;
}

/** The lock an edit page holds: its ticket, the server's expiry, and how long this server can count on it. */
export interface HeldLockView {
  ticket: string;
  expiresAt: Date;
  /** `heldLock().msLeft()` when the page was rendered. */
  msLeft: number;
}

/**
 * The edit page's script: a live countdown, a heartbeat while the page is open and in use, a
 * warning before the lock ends, and a message when it is gone. The heartbeat POSTs the form's
 * ticket to the keep-alive route, which resumes the lock (`Model.lock(id, owner, { resume })`, the
 * acquisition's ttl) and answers `{ expiresAt, msLeft }`, or 409 with why the lock is gone.
 * The deadline is kept on the page's monotonic clock (`performance.now()`), never compared with the
 * server's wall clock: the server's `msLeft` counted from before the request was sent (navigation
 * start for the page itself, the heartbeat's send for a heartbeat), so the countdown ends no later
 * than the lock does, whatever the two clocks say.
 */
const PAGE_SCRIPT = `(() => {
  const panel = document.getElementById('lock-panel');
  const form = document.getElementById('edit-form');
  if (!panel || !form) return;
  const every = Number(panel.dataset.keepAliveEvery);
  const warnBefore = Number(panel.dataset.warnBefore);
  const idleAfter = Number(panel.dataset.idleAfter);
  const ticket = form.elements.namedItem('ticket').value;
  const info = document.getElementById('lock-info');
  const warning = document.getElementById('lock-warning');
  const lost = document.getElementById('lock-lost');
  const expires = document.getElementById('lock-expires');
  let deadline = Number(panel.dataset.msLeft);
  let lastInput = performance.now();
  let gone = false;
  let sending = false;
  const clock = (ms) => {
    const s = Math.max(0, Math.ceil(ms / 1000));
    return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
  };
  const lose = (message) => {
    gone = true;
    info.hidden = true;
    warning.hidden = true;
    lost.textContent = message;
    lost.hidden = false;
    panel.dataset.state = 'lost';
  };
  const render = () => {
    const left = deadline - performance.now();
    panel.dataset.deadline = String(Math.round(deadline));
    for (const countdown of panel.querySelectorAll('.countdown')) countdown.textContent = clock(left);
    if (gone) return;
    if (left <= 0) return lose('Your lock on this item has expired: saving this page will be refused. Copy your changes, then open the item again.');
    warning.hidden = left > warnBefore;
    panel.dataset.state = warning.hidden ? 'held' : 'ending';
  };
  const keepAlive = async () => {
    if (gone || sending) return;
    sending = true;
    const sentAt = performance.now();
    try {
      const response = await fetch(panel.dataset.keepAliveUrl, { method: 'POST', body: new URLSearchParams({ ticket }) });
      const body = await response.json();
      if (response.ok) {
        deadline = sentAt + body.msLeft;
        expires.dateTime = body.expiresAt;
        expires.textContent = body.expiresAt.slice(11, 19) + ' UTC';
        panel.dataset.beats = String(Number(panel.dataset.beats) + 1);
      } else if (response.status === 409) {
        lose(body.message);
      }
    } catch {
      // The network or the server failed: the next beat tries again, and the countdown runs on.
    } finally {
      sending = false;
      render();
    }
  };
  for (const type of ['input', 'keydown', 'pointerdown']) form.addEventListener(type, () => (lastInput = performance.now()), { passive: true });
  document.getElementById('keep-editing').addEventListener('click', () => {
    lastInput = performance.now();
    void keepAlive();
  });
  setInterval(() => {
    if (performance.now() - lastInput < idleAfter) void keepAlive();
  }, every);
  setInterval(render, 250);
  render();
})();`;

const countdown = (ms: number) => {
  const s = Math.max(0, Math.ceil(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
};

/**
 * The edit form. The lock ticket travels in a hidden field, so the submit continues this very
 * lock; the page script renews it while the page is in use (`keepAlive`) and counts down.
 */
export function editPage(user: string, item: ItemView, lock: HeldLockView, keepAlive: KeepAliveView, error?: string): string {
  return layout(
    `Edit ${item.title}`,
    user,
    html`<h1>Edit “${item.title}”</h1>
<div id="lock-panel" data-state="held" data-beats="0" data-ms-left="${Math.floor(lock.msLeft)}" data-keep-alive-url="/items/${item.id}/keep-alive"
  data-keep-alive-every="${keepAlive.everyMs}" data-warn-before="${keepAlive.warnBeforeMs}" data-idle-after="${keepAlive.idleAfterMs}">
<p class="notice ok" id="lock-info">You hold the lock on this item for another <b class="countdown" id="countdown">${countdown(lock.msLeft)}</b> (until <time id="lock-expires" datetime="${lock.expiresAt.toISOString()}">${clock(lock.expiresAt)}</time>). Others see that you are editing it; it is renewed while this page is open and in use.</p>
<p class="notice warn" id="lock-warning" hidden>Your lock on this item ends in <b class="countdown">${countdown(lock.msLeft)}</b>: this page has been idle, so it is no longer renewed. <button type="button" id="keep-editing">Keep editing</button></p>
<p class="notice error" id="lock-lost" hidden></p>
</div>
${error ? html`<p class="notice error" id="error">${error}</p>` : ''}
<form method="post" action="/items/${item.id}" id="edit-form">
  <input type="hidden" name="ticket" value="${lock.ticket}">
  ${itemFields(item, 'edit')}
  <button id="save">Save</button>
</form>
<form method="post" action="/items/${item.id}/cancel">
  <input type="hidden" name="ticket" value="${lock.ticket}">
  <button id="cancel">Cancel and release</button>
</form>
<script>${new Html(PAGE_SCRIPT)}</script>`,
  );
}

/** Someone else is editing: who (their label) and when it frees, by the server's clock. */
export function lockedPage(user: string, item: ItemView, holder: { label: string | null; expiresAt?: Date; retryAfterMs?: number }): string {
  const when =
    holder.expiresAt && holder.retryAfterMs !== undefined
      ? html` It frees at <time datetime="${holder.expiresAt.toISOString()}">${clock(holder.expiresAt)}</time> (in ${seconds(holder.retryAfterMs)}) unless they save or cancel first.`
      : '';
  return layout(
    `${item.title} is being edited`,
    user,
    html`<h1>“${item.title}” is being edited</h1>
<p class="notice warn" id="locked"><b id="holder">${holder.label ?? 'Someone'}</b> is editing this item.${when}</p>
${itemFields(item, 'disabled')}
<p><a href="/items/${item.id}/edit" id="retry">Try again</a> · <a href="/items">Back to the list</a></p>`,
  );
}

/**
 * A submit that was refused because its lock is gone: nothing was saved. Shows why, the user's own
 * text first and in full (read-only, so it can be copied), then what is stored now.
 */
export function staleSubmitPage(user: string, current: ItemView, submitted: { title: string; status: string; notes: string }, reason: string): string {
  return layout(
    `Not saved: ${current.title}`,
    user,
    html`<h1>Your changes were not saved</h1>
<p class="notice error" id="stale">${reason}</p>
<section id="yours">
<h2>Your version (not saved)</h2>
${itemFields(submitted, 'readonly', 'mine-')}
</section>
<section id="stored">
<h2>What is stored now</h2>
${itemFields(current, 'disabled')}
</section>
<p><a href="/items/${current.id}/edit" id="reopen">Open it again to edit</a> · <a href="/items">Back to the list</a></p>`,
  );
}

/**
 * Every current lock, with force-unlock (`Model.forceUnlock(id)`): the holder's page learns at its
 * next heartbeat, and a save from it is refused. A real app would show this page to administrators only.
 */
export function adminLocksPage(user: string, locks: { id: string; title: string; label: string | null; expiresAt: Date }[], next: string | null, flash?: string): string {
  return layout(
    'Current locks',
    user,
    html`<h1>Current locks</h1>
<table id="locks"><thead><tr><th>Item</th><th>Held by</th><th>Expires</th><th></th></tr></thead><tbody>
${locks.map(
  (lock) => html`<tr data-id="${lock.id}"><td class="title">${lock.title}</td><td>${lock.label ?? '(no label)'}</td><td>${clock(lock.expiresAt)}</td>
<td><form class="inline" method="post" action="/admin/locks/${lock.id}/force-unlock"><button class="force-unlock">Force unlock</button></form></td></tr>`,
)}
</tbody></table>
${next ? html`<p><a href="/admin/locks?after=${encodeURIComponent(next)}">Next page</a></p>` : ''}
<p><a href="/items">Back to the list</a></p>`,
    flash,
  );
}

export function errorPage(user: string | undefined, status: number, message: string): string {
  return layout(`Error ${status}`, user, html`<h1>Something went wrong (${status})</h1><p class="notice error" id="error">${message}</p><p><a href="/items">Back to the list</a></p>`);
}
