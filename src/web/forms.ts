import { html, type Html } from './html.ts';

export type FormBody = Record<string, unknown> | undefined | null;

/** One text field of an urlencoded form: the first value, cut to `max` characters; '' when absent. */
export function formField(body: FormBody, name: string, max = 1000): string {
  const v = body?.[name];
  const s = Array.isArray(v) ? v[0] : v;
  return typeof s === 'string' ? s.slice(0, max) : '';
}

/** Every value of a repeated field (checkboxes), each cut to `max` characters, at most `count` of them. */
export function formValues(body: FormBody, name: string, max = 1000, count = 100): string[] {
  const v = body?.[name];
  const list = Array.isArray(v) ? v : v === undefined ? [] : [v];
  return list.filter((x): x is string => typeof x === 'string').slice(0, count).map((x) => x.slice(0, max));
}

export type FieldErrors = Partial<Record<string, string>>;

export interface InputOptions {
  type?: 'text' | 'email' | 'password' | 'date';
  value?: string;
  hint?: string;
  required?: boolean;
  autocomplete?: string;
  maxlength?: number;
  autofocus?: boolean;
}

/** A labelled input with its error message underneath. */
export function input(name: string, label: string, errors: FieldErrors, opts: InputOptions = {}): Html {
  const id = `f-${name}`;
  const error = errors[name];
  return html`<label for="${id}">${label}${opts.hint ? html` <span class="hint">${opts.hint}</span>` : ''}</label>
<input id="${id}" name="${name}" type="${opts.type ?? 'text'}" value="${opts.value ?? ''}"${opts.required ? html` required` : ''}${
    opts.autocomplete ? html` autocomplete="${opts.autocomplete}"` : ''
  }${opts.maxlength ? html` maxlength="${opts.maxlength}"` : ''}${opts.autofocus ? html` autofocus` : ''}${error ? html` aria-invalid="true" aria-describedby="${id}-error"` : ''}>
${error ? html`<div class="error" id="${id}-error">${error}</div>` : ''}`;
}

export function csrfInput(token: string): Html {
  return html`<input type="hidden" name="_csrf" value="${token}">`;
}
