/** The pieces every page is made of: headings that take focus, fields with their errors, messages. */
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { followLink, type PagePath } from './router.ts';

/**
 * The page's heading: sets the document's title and takes focus when the page opens, so a screen
 * reader says where the user is and Tab starts from the top of the new page.
 */
export function PageHeading({ children, title }: { children: ComponentChildren; title: string }) {
  const heading = useRef<HTMLHeadingElement>(null);
  // Before the page is painted: a page never shows under the last one's title.
  useLayoutEffect(() => {
    document.title = `${title} · svc console`;
    heading.current?.focus();
  }, [title]);
  return (
    <h1 ref={heading} tabIndex={-1}>
      {children}
    </h1>
  );
}

interface FieldProps {
  label: string;
  name: string;
  value: string;
  onInput: (value: string) => void;
  error?: string | undefined;
  hint?: string;
  type?: 'text' | 'email' | 'password';
  autoComplete?: string;
  multiline?: boolean;
  required?: boolean;
}

/** A labelled field; its hint and the service's error for it are read with it, the error also announced. */
export function Field({
  label,
  name,
  value,
  onInput,
  error,
  hint,
  type = 'text',
  autoComplete,
  multiline,
  required,
}: FieldProps) {
  const id = useId();
  const described = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ');
  const common = {
    id,
    name,
    value,
    required,
    'aria-invalid': error ? ('true' as const) : undefined,
    'aria-describedby': described || undefined,
    onInput: (event: Event) => onInput((event.currentTarget as HTMLInputElement).value),
  };
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {hint && (
        <p class="hint" id={`${id}-hint`}>
          {hint}
        </p>
      )}
      {multiline ? (
        <textarea {...common} rows={4} spellcheck={false} autoComplete="off" />
      ) : // One element a type: Preact's JSX types take `type` only as a literal.
      type === 'password' ? (
        <input {...common} type="password" autoComplete={autoComplete} />
      ) : type === 'email' ? (
        <input {...common} type="email" autoComplete={autoComplete} spellcheck={false} />
      ) : (
        <input {...common} type="text" autoComplete={autoComplete} spellcheck={false} />
      )}
      {error && (
        // An alert: a refusal shown at its field is announced as it appears, and said once.
        <p class="field-error" id={`${id}-error`} role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

/**
 * A button's visible word ("Approve") and, for screen readers, what it acts on ("com.example.app
 * 1.0.0"): a list of cards has many Approve buttons, and each must say which one it is.
 */
export function ActionWords({ action, on }: { action: string; on: string }) {
  return (
    <>
      {action}
      <span class="visually-hidden"> {on}</span>
    </>
  );
}

/** A refusal or failure, announced by screen readers as soon as it appears. */
export function Alert({ children }: { children: ComponentChildren }) {
  return <Message role="alert">{children}</Message>;
}

/** News that is not urgent (a key added, a version moved), announced when the reader is idle. */
export function Notice({ children }: { children: ComponentChildren }) {
  return <Message role="status">{children}</Message>;
}

function Message({ role, children }: { role: 'alert' | 'status'; children: ComponentChildren }) {
  const message = useRef<HTMLDivElement>(null);
  // A refusal takes the focus from the button that was refused: that button may now do something
  // else (Withdraw became Release), and a second Enter must not press it. News takes only a lost focus.
  useTakeFocus(message, children, role === 'alert' ? 'always' : 'when lost');
  return (
    <div ref={message} class={role === 'alert' ? 'alert' : 'notice'} role={role} tabIndex={-1}>
      {children}
    </div>
  );
}

/**
 * A message that appears after an action takes the focus, always or only when the action's own
 * button went away (a version moved on, a key removed): otherwise focus falls to the page and the
 * next Tab starts over from the top.
 */
function useTakeFocus(
  element: { current: HTMLElement | null },
  message: ComponentChildren,
  when: 'always' | 'when lost',
) {
  useEffect(() => {
    const lost = document.activeElement === document.body || document.activeElement === null;
    if (when === 'always' || lost) element.current?.focus();
  }, [element, message, when]);
}

/**
 * A form's submission: the browser's own submit prevented, and one at a time (an Enter pressed
 * again while the first is on its way does nothing); `busy` meanwhile, for `aria-disabled`.
 */
export function useSubmit(action: () => Promise<void>) {
  const [busy, setBusy] = useState(false);
  async function onSubmit(event: Event) {
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    try {
      await action();
    } finally {
      setBusy(false);
    }
  }
  return { busy, onSubmit };
}

/**
 * After a refusal, the first field it names takes the focus (or, when it names none, the
 * message), so a keyboard or screen-reader user lands where the fix is. Returns the form's ref.
 */
export function useFocusOnRefusal(refusal: unknown) {
  const form = useRef<HTMLFormElement>(null);
  useEffect(() => {
    if (!refusal) return;
    const target =
      form.current?.querySelector<HTMLElement>('[aria-invalid="true"]') ??
      form.current?.querySelector<HTMLElement>('[role="alert"]');
    target?.focus();
  }, [refusal]);
  return form;
}

export function Link({ to, children }: { to: PagePath; children: ComponentChildren }) {
  return (
    <a href={to} onClick={(event) => followLink(event, to)}>
      {children}
    </a>
  );
}

/**
 * A moment in the reader's own time zone and words, with the exact time for machines; to the
 * second when seconds matter (attempts a few seconds apart).
 */
export function When({ at, seconds }: { at: string | null; seconds?: boolean }) {
  if (!at) return <span>never</span>;
  return (
    <time dateTime={at}>
      {new Date(at).toLocaleString(undefined, {
        dateStyle: 'medium',
        timeStyle: seconds ? 'medium' : 'short',
      })}
    </time>
  );
}
