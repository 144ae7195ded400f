/**
 * The chat page's scroll pin, {@link createScrollPin}: the conversation follows new content
 * while the reader is at its end, and stays put once they scroll up to read. Inlined into the
 * page like the chat client, so it uses nothing from module scope.
 *
 * @module
 */

/** The pin of one scrolling conversation. */
export interface ScrollPin {
  /** Pins the view to the end again (a session was opened or the reader sent a message). */
  pin(): void;
}

/**
 * Keeps `scroller` scrolled to its end while the reader is there: new messages, streamed
 * deltas and approval cards inside `content` scroll into view. A reader who scrolled more than
 * `slackPx` above the end is not moved until they scroll back down (or {@link ScrollPin.pin}).
 *
 * @remarks Runs in the browser only. Changes are seen with a `MutationObserver` on `content`
 * (children, text) and a `ResizeObserver` on both elements (a taller message box, a narrower
 * window), so no caller has to remember to scroll.
 * @param scroller - the element that scrolls (the page's `main`)
 * @param content - the element whose changes are watched (the page's `#log`)
 * @param slackPx - how far above the end, in px, still counts as "at the end"
 * @returns the {@link ScrollPin}
 */
export function createScrollPin(
  scroller: HTMLElement,
  content: HTMLElement,
  slackPx: number,
): ScrollPin {
  let pinned = true;
  const toEnd = () => {
    if (pinned) scroller.scrollTop = scroller.scrollHeight;
  };
  scroller.addEventListener('scroll', () => {
    pinned = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight <= slackPx;
  });
  new MutationObserver(toEnd).observe(content, {
    childList: true,
    subtree: true,
    characterData: true,
  });
  const resized = new ResizeObserver(toEnd);
  resized.observe(scroller);
  resized.observe(content);
  return {
    pin() {
      pinned = true;
      toEnd();
    },
  };
}
