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

function itemFields(item: { title: string; status: string; notes: string }, disabled: boolean): Html {
  return html`<label for="title">Title</label>
  <input type="text" id="title" name="title" value="${item.title}" maxlength="200" ${disabled ? html`disabled` : ''}>
  <label for="status">Status</label>
  <select id="status" name="status" ${disabled ? html`disabled` : ''}>
    ${ITEM_STATUSES.map((status) => html`<option ${status === item.status ? html`selected` : ''}>${status}</option>`)}
  </select>
  <label for="notes">Notes</label>
  <textarea id="notes" name="notes" rows="4" maxlength="2000" ${disabled ? html`disabled` : ''}>${item.notes}</textarea>`;
}

/** The edit form. The lock ticket travels in a hidden field, so the submit continues this very lock. */
export function editPage(user: string, item: ItemView, lock: { ticket: string; expiresAt: Date }, error?: string): string {
  return layout(
    `Edit ${item.title}`,
    user,
    html`<h1>Edit “${item.title}”</h1>
<p class="notice ok" id="lock-info">You hold the lock on this item until <time datetime="${lock.expiresAt.toISOString()}">${clock(lock.expiresAt)}</time>. Others see that you are editing it.</p>
${error ? html`<p class="notice error" id="error">${error}</p>` : ''}
<form method="post" action="/items/${item.id}" id="edit-form">
  <input type="hidden" name="ticket" value="${lock.ticket}">
  ${itemFields(item, false)}
  <button id="save">Save</button>
</form>
<form method="post" action="/items/${item.id}/cancel">
  <input type="hidden" name="ticket" value="${lock.ticket}">
  <button id="cancel">Cancel and release</button>
</form>`,
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
${itemFields(item, true)}
<p><a href="/items/${item.id}/edit" id="retry">Try again</a> · <a href="/items">Back to the list</a></p>`,
  );
}

/** A submit that was refused because its lock is gone: nothing was saved; show why and what is stored now. */
export function staleSubmitPage(user: string, current: ItemView, submitted: { title: string; status: string; notes: string }, reason: string): string {
  return layout(
    `Not saved: ${current.title}`,
    user,
    html`<h1>Your changes were not saved</h1>
<p class="notice error" id="stale">${reason}</p>
<h2>What is stored now</h2>
${itemFields(current, true)}
<details><summary>Your unsaved version</summary>${itemFields(submitted, true)}</details>
<p><a href="/items/${current.id}/edit" id="reopen">Open it again to edit</a> · <a href="/items">Back to the list</a></p>`,
  );
}

export function adminLocksPage(user: string, locks: { id: string; title: string; label: string | null; expiresAt: Date }[], next: string | null): string {
  return layout(
    'Current locks',
    user,
    html`<h1>Current locks</h1>
<table id="locks"><thead><tr><th>Item</th><th>Held by</th><th>Expires</th></tr></thead><tbody>
${locks.map((lock) => html`<tr><td>${lock.title}</td><td>${lock.label ?? '(no label)'}</td><td>${clock(lock.expiresAt)}</td></tr>`)}
</tbody></table>
${next ? html`<p><a href="/admin/locks?after=${encodeURIComponent(next)}">Next page</a></p>` : ''}
<p><a href="/items">Back to the list</a></p>`,
  );
}

export function errorPage(user: string | undefined, status: number, message: string): string {
  return layout(`Error ${status}`, user, html`<h1>Something went wrong (${status})</h1><p class="notice error" id="error">${message}</p><p><a href="/items">Back to the list</a></p>`);
}
