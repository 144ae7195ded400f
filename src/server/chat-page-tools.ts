/**
 * The chat page's tool-call cards, {@link createToolCards}: inlined into the page like the chat
 * client, so it uses nothing from module scope (what it needs comes in as
 * {@link ToolCardDeps}).
 *
 * @module
 */

/** What the tool cards borrow from the chat client. */
export interface ToolCardDeps {
  /** Creates an element with a class name and, optionally, its text. */
  readonly el: (tag: string, className: string, text?: string) => HTMLElement;
  /** Creates a `type="button"` button with its label, class name and `data-testid`. */
  readonly button: (label: string, className: string, testId: string) => HTMLButtonElement;
  /** A value as text: a string as it is, anything else as JSON. */
  readonly str: (value: unknown) => string;
  /** Posts events to the session (`POST /api/sessions/:id/events`). */
  readonly sendEvents: (events: unknown[]) => Promise<unknown>;
}

/** Where a run's cards go: its reply, and its cards by `tool_use_id`. */
export interface ToolCardHost {
  readonly reply: HTMLElement;
  readonly tools: Map<string, HTMLElement>;
}

/** The tool cards' entry points, one per event the chat client applies. */
export interface ToolCards {
  /** `agent.tool_use`: the card, with its name and arguments. */
  used(host: ToolCardHost, payload: Record<string, unknown>): void;
  /** `agent.tool_result`: the result (or error) under the card. */
  result(host: ToolCardHost, payload: Record<string, unknown>): void;
  /** `agent.approval_requested`: Allow / Deny on the card. */
  askApproval(host: ToolCardHost, payload: Record<string, unknown>): void;
  /** `agent.approval_resolved`: the buttons go, the card says allowed, denied or withdrawn. */
  resolved(host: ToolCardHost, payload: Record<string, unknown>): void;
}

/**
 * Tool calls as cards a person reads: the tool's name, its arguments and result as `key: value`
 * lines (not raw JSON), its state (calling, needs your approval, allowed, denied, done, failed)
 * and, while it waits for approval, Allow / Deny buttons that send `user.tool_confirmation`.
 *
 * @remarks Runs in the browser only.
 * @param deps - {@link ToolCardDeps}
 * @returns the {@link ToolCards}
 */
export function createToolCards(deps: ToolCardDeps): ToolCards {
  const { el, button, str, sendEvents } = deps;

  /** A value as a person reads it: an object as `key: value` lines, text as text. */
  const fields = (value: unknown, empty: string) => {
    let data = value;
    if (typeof data === 'string') {
      try {
        data = JSON.parse(data);
      } catch {
        return el('p', 'tool-text', data as string);
      }
    }
    if (data === null || typeof data !== 'object' || Array.isArray(data)) {
      return el('p', 'tool-text', str(data));
    }
    const entries = Object.entries(data as Record<string, unknown>);
    if (entries.length === 0) return el('p', 'tool-text muted', empty);
    const list = el('dl', 'tool-fields');
    for (const [key, item] of entries) list.append(el('dt', '', key), el('dd', '', str(item)));
    return list;
  };

  /** The card of one tool call: name, arguments, approval, result. */
  const cardOf = (host: ToolCardHost, toolUseId: string, name: unknown, args: unknown) => {
    let card = host.tools.get(toolUseId);
    if (card === undefined) {
      card = el('section', 'tool');
      card.dataset.toolUseId = toolUseId;
      const head = el('header', 'tool-head');
      head.append(el('span', 'tool-icon'), el('span', 'tool-name', str(name)));
      head.append(el('span', 'tool-state', 'calling'));
      card.append(head, fields(args, 'no arguments'));
      card.setAttribute('aria-label', `Tool call: ${str(name)}`);
      host.tools.set(toolUseId, card);
      host.reply.append(card);
    }
    return card;
  };
  const setState = (card: HTMLElement, state: string, text: string) => {
    card.dataset.state = state;
    const label = card.querySelector('.tool-state');
    if (label !== null) label.textContent = text;
  };

  return {
    used(host, p) {
      cardOf(host, str(p.tool_use_id), p.name, p.arguments);
    },

    result(host, p) {
      const card = cardOf(host, str(p.tool_use_id), p.name, undefined);
      const failed = p.is_error === true;
      setState(card, failed ? 'error' : 'done', failed ? 'failed' : 'done');
      const result = el('div', 'tool-result');
      result.append(el('span', 'tool-result-label', failed ? 'Error' : 'Result'));
      result.append(fields(p.content, 'empty'));
      card.append(result);
    },

    askApproval(host, p) {
      const toolUseId = str(p.tool_use_id);
      const card = cardOf(host, toolUseId, p.name, p.args ?? p.arguments);
      setState(card, 'approval', 'needs your approval');
      const row = el('div', 'tool-actions');
      for (const allow of [true, false]) {
        const control = button(
          allow ? 'Allow' : 'Deny',
          allow ? 'button small primary' : 'button small',
          allow ? 'allow' : 'deny',
        );
        control.setAttribute('aria-label', `${allow ? 'Allow' : 'Deny'} ${str(p.name)}`);
        control.addEventListener('click', () => {
          for (const b of Array.from(row.querySelectorAll('button'))) b.disabled = true;
          void sendEvents([
            { type: 'user.tool_confirmation', payload: { tool_use_id: toolUseId, allow } },
          ]);
        });
        row.append(control);
      }
      card.append(row);
    },

    resolved(host, p) {
      const card = host.tools.get(str(p.tool_use_id));
      if (card === undefined) return;
      card.querySelector('.tool-actions')?.remove();
      const outcome = str(p.outcome);
      setState(
        card,
        outcome,
        outcome === 'allowed' ? 'allowed' : outcome === 'denied' ? 'denied' : 'withdrawn',
      );
    },
  };
}
