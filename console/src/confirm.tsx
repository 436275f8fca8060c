/** A question asked before a step that cannot be taken back (unpair, transfer, decommission, rotate). */
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';

/** A modal question: Escape or the safe answer cancels, and has the focus; focus returns to where it was. */
export function Confirm({
  title,
  action,
  keep,
  onConfirm,
  onCancel,
  children,
}: {
  title: string;
  /** The word of the step, on its (danger) button. */
  action: string;
  /** The word of the safe answer. */
  keep: string;
  onConfirm: () => void;
  onCancel: () => void;
  children: ComponentChildren;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const safe = useRef<HTMLButtonElement>(null);
  const titleId = useId();
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    dialog.current?.showModal();
    // The safe answer has the focus: Enter pressed twice must not take the step.
    safe.current?.focus();
    return () => opener?.focus();
  }, []);
  return (
    <dialog ref={dialog} aria-labelledby={titleId} onCancel={onCancel} class="confirm">
      <h2 id={titleId}>{title}</h2>
      {children}
      <div class="actions">
        <button type="button" class="danger" onClick={onConfirm}>
          {action}
        </button>
        <button ref={safe} type="button" class="secondary" onClick={onCancel}>
          {keep}
        </button>
      </div>
    </dialog>
  );
}
